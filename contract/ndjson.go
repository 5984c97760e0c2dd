package contract

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxRecord is the longest line ReadNDJSON accepts: one string record.
const MaxRecord = 1 << 20

// ReadNDJSON calls fn with each string record of a new-line delimited JSON
// stream, one line at a time; blank lines are skipped. A line that is not a
// JSON object, or is longer than MaxRecord, stops the reading with an
// error naming its line number. fn must not keep line: its memory is
// reused.
func ReadNDJSON(r io.Reader, fn func(line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxRecord)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if line[0] != '{' || !json.Valid(line) {
			return fmt.Errorf("line %d is not a JSON object", n)
		}
		if err := fn(line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("line %d is longer than %d bytes", n+1, MaxRecord)
		}
		return err
	}
	return nil
}

// WriteStringsArray reads the strings array of a decoder positioned at it
// (the next token is '[') and writes each record to w as one line of
// new-line delimited JSON, compacted. It returns the number of records.
func WriteStringsArray(dec *json.Decoder, w io.Writer) (int, error) {
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
