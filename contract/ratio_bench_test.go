package contract

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/servicegate/servicegate/jsonscan"
)

// The four 5 MB payloads whose check is measured against encoding/json's
// Valid on the same bytes: a parse-file answer of many small strings
// (parseFileAnswer), a build-file answer of one base64 content, a
// pre-export answer with plural strings and translations, and the strings
// of a job sent as new-line delimited JSON.
const ratioSize = 5 << 20

// buildFileAnswer is a build-file answer of about size bytes: one file,
// base64 in data.content.
func buildFileAnswer(size int) []byte {
	file := make([]byte, (size-32)/4*3)
	for i := range file {
		file[i] = byte(i*7/5) ^ byte(i>>9)
	}
	return []byte(`{"data":{"content":"` + base64.StdEncoding.EncodeToString(file) + `"}}`)
}

// preExportRecord writes the string record number i of a pre-export
// answer or of a job's strings: one in four plural, each translated into
// uk with a status.
func preExportRecord(b *bytes.Buffer, i int) {
	if i%4 == 0 {
		fmt.Fprintf(b, `{"uniqId":"h%d::%d","identifier":"plural.%d","context":"cart","hasPlurals":true,"maxLength":40,"text":{"one":"%d item in the cart","other":"%d items in the cart"},"translations":{"uk":{"text":{"one":"%d товар у кошику","few":"%d товари у кошику","many":"%d товарів у кошику","other":"%d товару у кошику"},"status":{"one":"approved","few":"translated","many":"translated","other":"untranslated"}}}}`,
			i%97, i, i, i, i, i, i, i, i)
		return
	}
	fmt.Fprintf(b, `{"uniqId":"h%d::%d","identifier":"key.%d","context":"Button on the settings page","isHidden":false,"labels":["ui","settings"],"text":"Save the changes to item %d","translations":{"uk":{"text":"Зберегти зміни до пункту %d","status":"approved"}}}`,
		i%97, i, i, i, i)
}

// preExportAnswer is a pre-export answer of about size bytes, and the
// uniqIds of its strings, which the job was sent.
func preExportAnswer(size int) ([]byte, []string) {
	var b bytes.Buffer
	var ids []string
	b.WriteString(`{"data":{"strings":[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		preExportRecord(&b, i)
		ids = append(ids, fmt.Sprintf("h%d::%d", i%97, i))
	}
	b.WriteString(`]}}`)
	return b.Bytes(), ids
}

// stringsNDJSON is the strings of a job of about size bytes as new-line
// delimited JSON, a record a line.
func stringsNDJSON(size int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < size; i++ {
		preExportRecord(&b, i)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// benchmarkRatio measures check against json.Valid on payload, the two
// interleaved in one loop (each first every other time), and reports the
// check's time as a multiple of json.Valid's: "x-json.Valid", the figure
// the contract check is held to (at most 0.5). On Linux the times are the
// thread's CPU time, which a machine busy with other work disturbs less
// than the wall clock; "x-json.Valid-wall" is the same ratio by the wall
// clock. ns/op is the two calls together.
func benchmarkRatio(b *testing.B, payload []byte, check func([]byte) error) {
	benchmarkRatioTo(b, payload, json.Valid, check)
}

// benchmarkRatioTo is benchmarkRatio with valid in the place of json.Valid.
func benchmarkRatioTo(b *testing.B, payload []byte, valid func([]byte) bool, check func([]byte) error) {
	if !valid(payload) {
		b.Fatal("the payload is not JSON")
	}
	if err := check(payload); err != nil {
		b.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu, wall [2]time.Duration // json.Valid, the check
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			which := (i + k) % 2
			startCPU, _ := threadCPU()
			start := time.Now()
			if which == 0 {
				if !valid(payload) {
					b.Fatal("not valid")
				}
			} else if err := check(payload); err != nil {
				b.Fatal(err)
			}
			wall[which] += time.Since(start)
			endCPU, _ := threadCPU()
			cpu[which] += endCPU - startCPU
		}
	}
	b.StopTimer()
	if _, ok := threadCPU(); !ok {
		cpu = wall
	}
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "x-json.Valid")
	b.ReportMetric(float64(wall[1])/float64(wall[0]), "x-json.Valid-wall")
	b.ReportMetric(float64(len(payload))*float64(b.N)/cpu[0].Seconds()/1e6, "json.Valid-MB/s")
	b.ReportMetric(float64(len(payload))*float64(b.N)/cpu[1].Seconds()/1e6, "check-MB/s")
}

func ratioJob(b *testing.B, module, jobType string) *Job {
	j, err := ParseJob(module, bytes.NewReader(job(jobType, nil)))
	if err != nil {
		b.Fatal(err)
	}
	return j
}

// BenchmarkRatioParseFile checks a 5 MB parse-file answer of many small
// strings.
func BenchmarkRatioParseFile(b *testing.B) {
	j := ratioJob(b, CustomFileFormat, ParseFile)
	benchmarkRatio(b, parseFileAnswer(ratioSize), func(p []byte) error {
		_, err := j.CheckAnswerBytes(p)
		return err
	})
}

// BenchmarkRatioBuildFile checks a 5 MB build-file answer: one base64
// content.
func BenchmarkRatioBuildFile(b *testing.B) {
	j := ratioJob(b, CustomFileFormat, BuildFile)
	benchmarkRatio(b, buildFileAnswer(ratioSize), func(p []byte) error {
		_, err := j.CheckAnswerBytes(p)
		return err
	})
}

// BenchmarkRatioPreExport checks a 5 MB pre-export answer of plural
// strings and translations against the uniqIds the job was sent.
func BenchmarkRatioPreExport(b *testing.B) {
	j := ratioJob(b, FilePreExport, PreExport)
	answer, ids := preExportAnswer(ratioSize)
	j.SetSentStrings(ids)
	benchmarkRatio(b, answer, func(p []byte) error {
		_, err := j.CheckAnswerBytes(p)
		return err
	})
}

// BenchmarkRatioNDJSON reads the 5 MB strings file of a pre-export job
// sent by URL as the Inliner does: each line checked, the uniqIds kept,
// the inline array written. The file is not one JSON value: json.Valid is
// called on each of its lines.
func BenchmarkRatioNDJSON(b *testing.B) {
	benchmarkRatioTo(b, stringsNDJSON(ratioSize), validLines, func(p []byte) error {
		_, _, err := StringsArray(p, true)
		return err
	})
}

// validLines is json.Valid on each line of ndjson.
func validLines(ndjson []byte) bool {
	for len(ndjson) > 0 {
		line := ndjson
		if i := bytes.IndexByte(ndjson, '\n'); i >= 0 {
			line, ndjson = ndjson[:i], ndjson[i+1:]
		} else {
			ndjson = nil
		}
		if len(line) > 0 && !json.Valid(line) {
			return false
		}
	}
	return true
}

// BenchmarkScanValidParseFile measures jsonscan.Valid alone on the answer
// of BenchmarkRatioParseFile: the floor of the check, a walk with no rule.
func BenchmarkScanValidParseFile(b *testing.B) {
	benchmarkRatio(b, parseFileAnswer(ratioSize), func(p []byte) error {
		return jsonscan.Valid(p, jsonscan.EncodingJSONMaxDepth)
	})
}
