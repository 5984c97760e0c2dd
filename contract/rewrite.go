package contract

import (
	"encoding/json"
	"errors"
	"io"
)

// member is what rewriteObject does with one member of an object.
type member struct {
	// key is the key written; "" drops the member.
	key string
	// value writes the value, reading it from the decoder (which is at
	// it); nil copies the value as it is.
	value func(dec *json.Decoder, out io.Writer) error
}

// keep copies a member as it is.
func keep(key string) member { return member{key: key} }

// drop leaves a member out.
var drop = member{}

// rewriteObject copies the JSON object dec is at to out member by member,
// in order, each as rewrite(key) says, and reads the object's closing
// brace. It holds one member's value at a time, never the object. The
// job rewrite of inline (InlineJob) is made of it; the answer spill
// (SpillAnswer) reads the answer's bytes with jsonscan instead.
func rewriteObject(dec *json.Decoder, out io.Writer, rewrite func(key string) member) error {
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
		m := rewrite(key)
		if m.key == "" {
			if err := dec.Decode(&raw); err != nil {
				return err
			}
			continue
		}
		if !first {
			io.WriteString(out, ",")
		}
		first = false
		writeKey(out, m.key)
		if m.value != nil {
			if err := m.value(dec, out); err != nil {
				return err
			}
			continue
		}
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		out.Write(raw)
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	_, err := io.WriteString(out, "}")
	return err
}

// rewriteDocument rewrites the JSON object that is the whole of dec's
// input, as rewriteObject does, and refuses anything after it.
func rewriteDocument(dec *json.Decoder, out io.Writer, rewrite func(key string) member) error {
	if err := rewriteObject(dec, out, rewrite); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

// skipValue reads past the value dec is at.
func skipValue(dec *json.Decoder) error {
	var raw json.RawMessage
	return dec.Decode(&raw)
}
