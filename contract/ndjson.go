package contract

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/servicegate/servicegate/jsonscan"
)

// MaxRecord is the longest line ReadNDJSON accepts: one string record.
const MaxRecord = 1 << 20

// ReadNDJSON calls fn with each string record of a new-line delimited JSON
// stream, one line at a time; blank lines are skipped. A line that is not a
// JSON object, or is longer than MaxRecord, stops the reading with an
// error naming its line number. fn must not keep line: its memory is
// reused.
func ReadNDJSON(r io.Reader, fn func(line []byte) error) error {
	return readNDJSON(r, false, func(line, _ []byte) error { return fn(line) })
}

// readNDJSON is ReadNDJSON that, with uniqIDs, reads each record's uniqId
// in the same pass as it checks the line (see recordReader) and hands it
// to fn beside the line ("" when it has none); fn keeps neither.
func readNDJSON(r io.Reader, uniqIDs bool, fn func(line, uniqID []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxRecord)
	var rr recordReader
	var s jsonscan.Scanner
	s.MaxDepth = jsonscan.EncodingJSONMaxDepth // json.Valid's
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var id []byte
		var err error
		if line[0] == '{' {
			s.Reset(line)
			if uniqIDs {
				id, _, err = rr.read(&s)
			} else {
				err = s.Skip()
			}
			if err == nil {
				err = s.Finish()
			}
		}
		if line[0] != '{' || err != nil {
			return fmt.Errorf("line %d is not a JSON object", n)
		}
		if err := fn(line, id); err != nil {
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

// recordReader reads string records for their uniqId as json.Unmarshal
// reads one into a struct { UniqID string `json:"uniqId"` }, checking the
// record as it goes: the key matched as encoding/json matches names, the
// last string counting, null leaving it as it was.
type recordReader struct {
	id []byte // the uniqId, decoded: a key decoded later may not overwrite it
}

// read reads the record at s. typeErr tells that json.Unmarshal
// would report an error of type (the record neither an object nor null, or
// a uniqId neither a string nor null) and leave id as it is; err is the
// scanner's, for broken JSON.
func (rr *recordReader) read(s *jsonscan.Scanner) (id []byte, typeErr bool, err error) {
	switch s.Peek() {
	case '{':
	case 'n':
		return nil, false, s.Skip()
	default:
		return nil, true, s.Skip()
	}
	rr.id = rr.id[:0]
	err = s.Object(func(key []byte) error {
		if !foldedIs(key, "uniqId", "UNIQID") {
			return s.Skip()
		}
		switch s.Peek() {
		case '"':
			v, err := s.String()
			rr.id = append(rr.id[:0], v...)
			return err
		case 'n':
		default:
			typeErr = true
		}
		return s.Skip()
	})
	return rr.id, typeErr, err
}
