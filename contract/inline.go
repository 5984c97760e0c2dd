package contract

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/servicegate/servicegate/limits"
	"github.com/servicegate/servicegate/safehttp"
)

// Inliner fetches the payloads a job carries by URL (stringsUrl,
// file.contentUrl) and hands them to the app inline (strings,
// file.content), so that an app needs one code path only.
type Inliner struct {
	// Client fetches the payloads: from the allowed hosts only, at
	// public addresses, within a size cap.
	Client *safehttp.Client
	// MaxSize is the client's size cap, named in refusals.
	MaxSize int64
	// Timeout bounds fetching the payloads of one job.
	Timeout time.Duration
}

// NewInliner returns an Inliner whose client fetches with o: from
// o.Hosts only, within o.MaxSize and o.Timeout.
func NewInliner(o safehttp.Options) *Inliner {
	return &Inliner{Client: safehttp.New(o), MaxSize: o.MaxSize, Timeout: o.Timeout}
}

// InlineError is a payload that could not be inlined: Status and Message
// are the answer to the service, for the person who reads it in the
// service's UI. Message names the payload, never its URL or contents.
type InlineError struct {
	Status  int
	Message string
}

func (e *InlineError) Error() string { return e.Message }

// Inline fetches the payloads job carries by URL and returns raw (the job
// as the service sent it) rewritten to carry them inline. The URLs of job
// are cleared; for a pre-export job, the uniqIds of the strings it was sent
// are recorded for the check of the answer. Failures are *InlineError.
func (in *Inliner) Inline(ctx context.Context, job *Job, raw []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, in.Timeout)
	defer cancel()
	var stringsArray, content []byte
	if job.StringsURL != "" {
		ndjson, err := in.fetch(ctx, job.StringsURL, "strings")
		if err != nil {
			return nil, err
		}
		var ids []string
		stringsArray, ids, err = StringsArray(ndjson, job.Type == PreExport)
		if err != nil {
			return nil, &InlineError{http.StatusBadGateway, "The strings file the service sent could not be read: " + err.Error() + "."}
		}
		if job.Type == PreExport {
			job.SetSentStrings(ids)
		}
	}
	if job.ContentURL != "" {
		file, err := in.fetch(ctx, job.ContentURL, "file")
		if err != nil {
			return nil, err
		}
		content = make([]byte, base64.StdEncoding.EncodedLen(len(file)))
		base64.StdEncoding.Encode(content, file)
	}
	out, err := InlineJob(raw, stringsArray, content)
	if err != nil {
		return nil, &InlineError{http.StatusBadRequest, "The request is not a valid module job: " + err.Error() + "."}
	}
	job.StringsURL, job.ContentURL = "", ""
	return out, nil
}

// fetch reads the payload at url; what names it in messages.
func (in *Inliner) fetch(ctx context.Context, rawURL, what string) ([]byte, error) {
	if u, err := url.Parse(rawURL); err != nil || !in.Client.HostAllowed(u) {
		return nil, &InlineError{http.StatusBadRequest, fmt.Sprintf("The %s URL of the job points to a host this app does not fetch from.", what)}
	}
	b, err := in.Client.Get(ctx, rawURL)
	if err == nil {
		return b, nil
	}
	var se *safehttp.StatusError
	switch {
	case errors.Is(err, safehttp.ErrNotPublic) || errors.Is(err, safehttp.ErrHostNotAllowed):
		// the address dialled, or a redirect
		return nil, &InlineError{http.StatusBadRequest, fmt.Sprintf("The %s URL of the job points to an address this app does not fetch from.", what)}
	case errors.Is(err, limits.ErrTooLarge):
		return nil, &InlineError{http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"The %s of the job is too large for this app: it accepts at most %s.", what, limits.LimitName(in.MaxSize))}
	case errors.As(err, &se):
		return nil, &InlineError{http.StatusBadGateway, fmt.Sprintf("The %s of the job could not be fetched from its URL: the server answered %d. Try again.", what, se.Code)}
	case errors.Is(err, safehttp.ErrIncomplete) && ctx.Err() == nil:
		return nil, &InlineError{http.StatusBadGateway, fmt.Sprintf("The %s of the job could not be fetched whole from its URL. Try again.", what)}
	case ctx.Err() != nil:
		return nil, &InlineError{http.StatusGatewayTimeout, fmt.Sprintf("The %s of the job could not be fetched within %s.", what, limits.DurationName(in.Timeout))}
	default:
		return nil, &InlineError{http.StatusBadGateway, fmt.Sprintf("The %s of the job could not be fetched from its URL. Try again.", what)}
	}
}

// StringsArray turns the strings of a job sent as new-line delimited JSON
// (see ReadNDJSON) into the JSON array the job carries inline. With ids,
// it also returns the uniqId of each string, in order.
func StringsArray(ndjson []byte, ids bool) (array []byte, uniqIDs []string, err error) {
	var arr bytes.Buffer
	arr.Grow(len(ndjson) + 2)
	arr.WriteByte('[')
	n := 0
	err = readNDJSON(bytes.NewReader(ndjson), ids, func(line, uniqID []byte) error {
		if n > 0 {
			arr.WriteByte(',')
		}
		n++
		arr.Write(line)
		if ids {
			uniqIDs = append(uniqIDs, string(uniqID))
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	arr.WriteByte(']')
	return arr.Bytes(), uniqIDs, nil
}

// InlineJob rewrites a job so that it carries its payloads inline:
// stringsUrl becomes strings (stringsArray, a JSON array) when
// stringsArray is set, and file.contentUrl becomes file.content (content,
// base64) when content is set. A strings or file.content the job carried
// besides its URL is dropped, so that no key appears twice. Everything
// else is copied as it is, in order: the inverse of SpillAnswer.
func InlineJob(job, stringsArray, content []byte) ([]byte, error) {
	var out bytes.Buffer
	out.Grow(len(job) + len(stringsArray) + len(content))
	err := rewriteDocument(json.NewDecoder(bytes.NewReader(job)), &out, func(key string) member {
		switch {
		case stringsArray != nil && key == "strings":
			return drop
		case stringsArray != nil && key == "stringsUrl":
			return member{key: "strings", value: func(dec *json.Decoder, out io.Writer) error {
				if err := skipValue(dec); err != nil {
					return err
				}
				_, err := out.Write(stringsArray)
				return err
			}}
		case content != nil && key == "file":
			return member{key: key, value: func(dec *json.Decoder, out io.Writer) error {
				err := rewriteObject(dec, out, func(key string) member {
					switch key {
					case "content":
						return drop
					case "contentUrl":
						return member{key: "content", value: func(dec *json.Decoder, out io.Writer) error {
							if err := skipValue(dec); err != nil {
								return err
							}
							io.WriteString(out, `"`)
							out.Write(content)
							_, err := io.WriteString(out, `"`)
							return err
						}}
					}
					return keep(key)
				})
				if errors.Is(err, errNotObject) {
					return errFileNotObject
				}
				return err
			}}
		}
		return keep(key)
	})
	switch {
	case err == nil:
		return out.Bytes(), nil
	case errors.Is(err, errFileNotObject):
		return nil, errFileNotObject
	case errors.Is(err, errNotObject) && out.Len() == 0:
		return nil, errors.New("the body is not a JSON object")
	default:
		return nil, errors.New("the body is not valid JSON")
	}
}

var errFileNotObject = errors.New("file is not an object")
