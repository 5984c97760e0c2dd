package contract

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
)

// Put stores one payload of kind (KindStrings, KindContent, KindPreview):
// it calls write with the payload's writer and returns the payload's URL.
type Put func(kind string, write func(io.Writer) error) (url string, err error)

// SpillAnswer rewrites an app's answer so that its payloads travel by URL:
// data.strings becomes data.stringsUrl (new-line delimited JSON, a record a
// line), data.content data.contentUrl (the decoded file) and data.preview
// data.previewUrl (the decoded HTML), each stored through put. Everything
// else is copied as it is. The answer is read once, a record at a time.
func SpillAnswer(body io.Reader, out io.Writer, put Put) error {
	dec := json.NewDecoder(body)
	if err := openObject(dec); err != nil {
		return err
	}
	io.WriteString(out, "{")
	var raw json.RawMessage
	first := true
	for dec.More() {
		key, err := nextKey(dec)
		if err != nil {
			return err
		}
		if !first {
			io.WriteString(out, ",")
		}
		first = false
		writeKey(out, key)
		if key != "data" {
			if err := dec.Decode(&raw); err != nil {
				return err
			}
			out.Write(raw)
			continue
		}
		if err := spillData(dec, out, put); err != nil {
			return err
		}
	}
	if err := closeObject(dec); err != nil {
		return err
	}
	_, err := io.WriteString(out, "}")
	return err
}

func spillData(dec *json.Decoder, out io.Writer, put Put) error {
	if err := openObject(dec); err != nil {
		return err
	}
	io.WriteString(out, "{")
	var raw json.RawMessage
	first := true
	for dec.More() {
		key, err := nextKey(dec)
		if err != nil {
			return err
		}
		if !first {
			io.WriteString(out, ",")
		}
		first = false
		var url string
		switch key {
		case "strings":
			url, err = put(KindStrings, func(w io.Writer) error {
				_, err := WriteStringsArray(dec, w)
				return err
			})
		case "content", "preview":
			var s string
			if err := dec.Decode(&s); err != nil {
				return err
			}
			kind := KindContent
			if key == "preview" {
				kind = KindPreview
			}
			url, err = put(kind, func(w io.Writer) error {
				_, err := io.Copy(w, base64.NewDecoder(base64.StdEncoding, strings.NewReader(s)))
				return err
			})
		default:
			if err := dec.Decode(&raw); err != nil {
				return err
			}
			writeKey(out, key)
			out.Write(raw)
			continue
		}
		if err != nil {
			return err
		}
		writeKey(out, key+"Url")
		writeURL(out, url)
	}
	_, err := dec.Token()
	io.WriteString(out, "}")
	return err
}

// writeURL writes url as a JSON string with its & and other characters as
// they are (json.Marshal would write \u0026), so the link reads as it is
// served.
func writeURL(out io.Writer, url string) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(url) // a string always encodes
	io.WriteString(out, strings.TrimSuffix(b.String(), "\n"))
}

func writeKey(out io.Writer, key string) {
	b, _ := json.Marshal(key)
	out.Write(b)
	io.WriteString(out, ":")
}
