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
