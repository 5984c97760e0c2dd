package contract

// The answer spill as it was written on encoding/json's Decoder, kept as
// the reference the byte-slice spill is compared with
// (FuzzSpillAnswerMatchesReference).

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// refSpillAnswer is SpillAnswer as it was.
func refSpillAnswer(body io.Reader, out io.Writer, put Put) error {
	return rewriteDocument(json.NewDecoder(body), out, func(key string) member {
		if key != "data" {
			return keep(key)
		}
		return member{key: key, value: func(dec *json.Decoder, out io.Writer) error {
			return rewriteObject(dec, out, func(key string) member { return refSpillMember(key, put) })
		}}
	})
}

func refSpillMember(key string, put Put) member {
	var store func(dec *json.Decoder) (string, error)
	switch key {
	case "strings":
		store = func(dec *json.Decoder) (string, error) {
			return put(KindStrings, func(w io.Writer) error {
				_, err := refWriteStringsArray(dec, w)
				return err
			})
		}
	case "content", "preview":
		kind := KindContent
		if key == "preview" {
			kind = KindPreview
		}
		store = func(dec *json.Decoder) (string, error) {
			var s string
			if err := dec.Decode(&s); err != nil {
				return "", err
			}
			return put(kind, func(w io.Writer) error {
				_, err := io.Copy(w, base64.NewDecoder(base64.StdEncoding, strings.NewReader(s)))
				return err
			})
		}
	default:
		return keep(key)
	}
	return member{key: key + "Url", value: func(dec *json.Decoder, out io.Writer) error {
		url, err := store(dec)
		if err != nil {
			return err
		}
		writeURL(out, url)
		return nil
	}}
}

// refWriteStringsArray is WriteStringsArray as it was, on a Decoder.
func refWriteStringsArray(dec *json.Decoder, w io.Writer) (int, error) {
	tok, err := dec.Token()
	if err != nil {
		return 0, err
	}
	if tok != json.Delim('[') {
		return 0, errors.New("strings is not an array")
	}
	var raw json.RawMessage
	var line bytes.Buffer
	n := 0
	for dec.More() {
		if err := dec.Decode(&raw); err != nil {
			return n, err
		}
		line.Reset()
		if err := json.Compact(&line, raw); err != nil {
			return n, err
		}
		line.WriteByte('\n')
		if _, err := w.Write(line.Bytes()); err != nil {
			return n, err
		}
		n++
	}
	_, err = dec.Token()
	return n, err
}
