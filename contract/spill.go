package contract

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/servicegate/servicegate/jsonscan"
)

// Put stores one payload of kind (KindStrings, KindContent, KindPreview):
// it calls write with the payload's writer and returns the payload's URL.
type Put func(kind string, write func(io.Writer) error) (url string, err error)

// SpillAnswer rewrites an app's answer so that its payloads travel by URL:
// data.strings becomes data.stringsUrl (new-line delimited JSON, a record a
// line, compacted), data.content data.contentUrl (the decoded file) and
// data.preview data.previewUrl (the decoded HTML), each stored through put.
// Everything else is copied as it is.
//
// The answer is read where it lies, as CheckAnswer reads it: a
// *bytes.Reader's bytes in place, an *os.File mapped into memory on Unix,
// any other reader first copied to an unnamed temporary file that is
// mapped. See SpillAnswerBytes.
func SpillAnswer(body io.Reader, out io.Writer, put Put) error {
	answer, release, err := answerBytes(body)
	if err != nil {
		return fmt.Errorf("reading the answer to spill it: %w", err)
	}
	defer release()
	return SpillAnswerBytes(answer, out, put)
}

// SpillAnswerBytes is SpillAnswer over answer, the whole answer held by the
// caller. It accepts what encoding/json accepts and keeps no copy of the
// answer: records go to put's writer through a buffer of 32 KB, and a
// content or preview is decoded from base64 a chunk at a time.
func SpillAnswerBytes(answer []byte, out io.Writer, put Put) error {
	sp := spiller{out: out, put: put}
	sp.s.MaxDepth = jsonscan.EncodingJSONMaxDepth
	sp.s.Reset(answer)
	err := sp.object(func(key []byte) error {
		if string(key) != "data" {
			return sp.keep(key)
		}
		writeKeyBytes(out, key)
		return sp.object(sp.dataMember)
	})
	if err != nil {
		return err
	}
	return sp.s.Finish()
}

// spiller holds the state of one answer's spill.
type spiller struct {
	s   jsonscan.Scanner
	out io.Writer
	put Put
	buf []byte // decoded base64 on its way to put's writer
}

// object copies the object at the scanner to out, each member written by
// member, which writes its key and reads its value. A member whose key is
// empty is left out, as it always was.
func (sp *spiller) object(member func(key []byte) error) error {
	io.WriteString(sp.out, "{")
	first := true
	err := sp.s.Object(func(key []byte) error {
		if len(key) == 0 {
			_, err := sp.value()
			return err
		}
		if !first {
			io.WriteString(sp.out, ",")
		}
		first = false
		return member(key)
	})
	if err != nil {
		return err
	}
	_, err = io.WriteString(sp.out, "}")
	return err
}

// value reads one value as encoding/json's Decoder reads a value with
// Decode: its nesting counted from the value itself.
func (sp *spiller) value() ([]byte, error) {
	depth := sp.s.Depth()
	sp.s.SetDepth(0)
	v, err := sp.s.Value()
	sp.s.SetDepth(depth)
	return v, err
}

// keep copies a member as it is.
func (sp *spiller) keep(key []byte) error {
	writeKeyBytes(sp.out, key)
	v, err := sp.value()
	if err != nil {
		return err
	}
	_, err = sp.out.Write(v)
	return err
}

// dataMember stores a member of data that is a payload through put and
// writes its URL in its place; it copies any other member.
func (sp *spiller) dataMember(key []byte) error {
	var url string
	var err error
	switch string(key) {
	case "strings":
		url, err = sp.put(KindStrings, func(w io.Writer) error {
			_, err := sp.writeStrings(w)
			return err
		})
	case "content":
		url, err = sp.storeBase64(KindContent)
	case "preview":
		url, err = sp.storeBase64(KindPreview)
	default:
		return sp.keep(key)
	}
	if err != nil {
		return err
	}
	writeKey(sp.out, string(key)+"Url")
	writeURL(sp.out, url)
	return nil
}

// flushAt is the size of the buffers between the answer and put's writer.
const flushAt = 32 << 10

// writeStrings reads the strings array at the scanner and writes each
// record to w as one line of new-line delimited JSON, compacted as
// json.Compact compacts. It returns the number of records.
func (sp *spiller) writeStrings(w io.Writer) (int, error) {
	bw := bufio.NewWriterSize(w, flushAt)
	n := 0
	err := sp.s.Array(func() error {
		v, err := sp.value()
		if err != nil {
			return err
		}
		compact(bw, v)
		n++
		// A failed write is kept by bw and returned by every later one.
		return bw.WriteByte('\n')
	})
	if err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// compact writes v, one JSON value known to be valid, without the white
// space outside its strings: what json.Compact writes.
func compact(bw *bufio.Writer, v []byte) {
	start := 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			i = stringEnd(v, i)
		case ' ', '\t', '\n', '\r':
			if start < i {
				bw.Write(v[start:i])
			}
			start = i + 1
		}
	}
	bw.Write(v[start:])
}

// stringEnd returns the index of the quote that closes the string opened
// at v[i], in valid JSON: the first quote after it that follows an even
// number of backslashes.
func stringEnd(v []byte, i int) int {
	for {
		i += 1 + bytes.IndexByte(v[i+1:], '"')
		k := i - 1
		for v[k] == '\\' {
			k--
		}
		if (i-1-k)%2 == 0 {
			return i
		}
	}
}

// storeBase64 stores the file or preview at the scanner, a string in
// base64 (null is an empty file, as encoding/json decodes null into a
// string), decoded, through put.
func (sp *spiller) storeBase64(kind string) (string, error) {
	v, err := sp.value()
	if err != nil {
		return "", err
	}
	switch {
	case string(v) == "null":
		v = []byte(`""`)
	case v[0] != '"':
		return "", fmt.Errorf("%s is not a string", strings.TrimPrefix(kind, "."))
	}
	return sp.put(kind, func(w io.Writer) error { return sp.decodeBase64(w, v) })
}

// decodeBase64 writes to w the decoded base64 of str, the text of a valid
// JSON string: what io.Copy writes from base64.NewDecoder(
// base64.StdEncoding, …) reading the string as encoding/json decodes it.
//
// Contents without escapes, a multiple of 4 bytes long and with padding
// only in their last 4 bytes, are decoded where they lie a chunk at a
// time: the stream decoder decodes them the same and fails where a chunk
// fails. Others (escapes, which may hide new lines the stream decoder
// skips; padding inside, which it accepts at the end of what it read)
// go through the stream decoder, read as it reads a strings.Reader.
func (sp *spiller) decodeBase64(w io.Writer, str []byte) error {
	raw := str[1 : len(str)-1]
	if bytes.IndexByte(raw, '\\') >= 0 || len(raw)%4 != 0 || bytes.IndexByte(raw[:max(len(raw)-4, 0)], '=') >= 0 {
		var r jsonscan.StringReader
		r.Reset(str)
		_, err := io.Copy(w, base64.NewDecoder(base64.StdEncoding, fullReader{&r}))
		return err
	}
	// A buffer of at most flushAt bytes, no larger than the decoded file.
	if size := min(flushAt, base64.StdEncoding.DecodedLen(len(raw))); cap(sp.buf) < size {
		sp.buf = make([]byte, size)
	}
	buf := sp.buf[:cap(sp.buf)]
	chunk := len(buf) / 3 * 4 // bytes of base64 that decode into buf, a multiple of 4
	for len(raw) > 0 {
		in := raw[:min(len(raw), chunk)]
		raw = raw[len(in):]
		n, err := base64.StdEncoding.Decode(buf, in)
		if err != nil {
			return err
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
	}
	return nil
}

// fullReader fills each read whole, as a strings.Reader of the decoded
// string does: what the stream decoder decodes at a time depends on how
// much it reads.
type fullReader struct{ r io.Reader }

func (f fullReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := f.r.Read(p[n:])
		n += m
		if err == io.EOF {
			if n > 0 {
				return n, nil
			}
			return 0, io.EOF
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
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

// writeKeyBytes writes key, decoded, as writeKey writes it: as it is when
// json.Marshal would write it so.
func writeKeyBytes(out io.Writer, key []byte) {
	for _, c := range key {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			writeKey(out, string(key))
			return
		}
	}
	io.WriteString(out, `"`)
	out.Write(key)
	io.WriteString(out, `":`)
}
