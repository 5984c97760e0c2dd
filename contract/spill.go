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
	return rewriteDocument(json.NewDecoder(body), out, func(key string) member {
		if key != "data" {
			return keep(key)
		}
		return member{key: key, value: func(dec *json.Decoder, out io.Writer) error {
			return rewriteObject(dec, out, func(key string) member { return spillMember(key, put) })
		}}
	})
}

// spillMember stores a member of data that is a payload through put and
// writes its URL in its place.
func spillMember(key string, put Put) member {
	var store func(dec *json.Decoder) (string, error)
	switch key {
	case "strings":
		store = func(dec *json.Decoder) (string, error) {
			return put(KindStrings, func(w io.Writer) error {
				_, err := WriteStringsArray(dec, w)
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
