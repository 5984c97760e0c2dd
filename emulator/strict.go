package emulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"
)

// maxAPIBody caps a JSON request of the console's API (a delivery's body
// and a build's strings are in it).
const maxAPIBody = 8 << 20

// decodeStrict decodes data, one JSON object, into v, a pointer to a
// struct, and refuses what its sender cannot have meant: a member the
// request does not have, one that differs from a member's name only by
// case (encoding/json would take it), a member given twice, a value of
// the wrong type, or more than one value. The error says which, for the
// person who wrote the request; it never quotes a value.
func decodeStrict(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return errors.New("the request has no body: send a JSON object")
	}
	if trimmed[0] != '{' {
		return errors.New("the request is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := checkMembers(dec, reflect.TypeOf(v).Elem(), ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("the request holds more than one JSON value")
	}
	strict := json.NewDecoder(bytes.NewReader(data))
	strict.DisallowUnknownFields()
	if err := strict.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return fmt.Errorf("the member %q has the wrong type: %s is meant", typeErr.Field, typeName(typeErr.Type))
		}
		var ve valueError
		if errors.As(err, &ve) {
			return ve
		}
		return errors.New("the request is not a JSON object of the fields this API takes")
	}
	return nil
}

// valueError is an error of a value's own decoding, said as it is.
type valueError struct{ error }

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Slice:
		return "a list"
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "an object"
	}
	return t.String()
}

// innerTyper is a field type that decodes into another (see optional).
type innerTyper interface{ innerType() reflect.Type }

// checkMembers reads one value from dec, checking the members of its
// objects against the fields of t (nil: any members, each once).
func checkMembers(dec *json.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil {
		if it, ok := reflect.New(t).Interface().(innerTyper); ok {
			t = it.innerType()
		} else if t == reflect.TypeFor[json.RawMessage]() || t.Kind() == reflect.Interface {
			t = nil
		}
	}
	tok, err := dec.Token()
	if err != nil {
		return errors.New("the request is not valid JSON")
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	where := "the request"
	if path != "" {
		where = path
	}
	switch delim {
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for dec.More() {
			if err := checkMembers(dec, elem, path+"[]"); err != nil {
				return err
			}
		}
	case '{':
		fields := structFields(t)
		var seen []string
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return errors.New("the request is not valid JSON")
			}
			key := tok.(string)
			for _, other := range seen {
				if other == key {
					return fmt.Errorf("%s names %q twice", where, key)
				}
				if strings.EqualFold(other, key) {
					return fmt.Errorf("%s has members that differ only by case (%q)", where, key)
				}
			}
			seen = append(seen, key)
			var next reflect.Type
			switch {
			case fields != nil:
				ft, ok := fields[key]
				if !ok {
					return unknownMember(where, key, fields)
				}
				next = ft
			case t != nil && t.Kind() == reflect.Map:
				next = t.Elem()
			}
			if err := checkMembers(dec, next, joinPath(path, key)); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	if err != nil {
		return errors.New("the request is not valid JSON")
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// structFields are the JSON names of t's fields and their types, nil when
// t is not a struct.
func structFields(t reflect.Type) map[string]reflect.Type {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	fields := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

func unknownMember(where, key string, fields map[string]reflect.Type) error {
	names := make([]string, 0, len(fields))
	for name := range fields {
		if strings.EqualFold(name, key) {
			return fmt.Errorf("%s has %q where %q is meant: names differ by case", where, key, name)
		}
		names = append(names, fmt.Sprintf("%q", name))
	}
	slices.Sort(names)
	return fmt.Errorf("%s has no member %q; its members are %s", where, key, strings.Join(names, ", "))
}

// optional is a member that may be absent, null or a value: Set says it
// was given, Value is nil for null.
type optional[T any] struct {
	Set   bool
	Value *T
}

func (o *optional[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(bytes.TrimSpace(b)) == "null" {
		o.Value = nil
		return nil
	}
	o.Value = new(T)
	return json.Unmarshal(b, o.Value)
}

func (*optional[T]) innerType() reflect.Type { return reflect.TypeFor[T]() }

// duration is a duration written as Go writes them ("5s", "1m30s").
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) != nil {
		return valueError{errors.New(`a delay is a duration in a string, such as "5s"`)}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return valueError{fmt.Errorf("the delay %q is not a duration such as \"5s\"", s)}
	}
	*d = duration(v)
	return nil
}
