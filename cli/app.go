package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/emulator"
)

// CheckDescriptor prints what the descriptor at source declares, or its
// defects. A module kind a letter off one servicegate routes is a likely
// defect (see descriptor.LikelyDefects), printed before the modules.
// noDefects is false when it has defects or likely ones; err is set when
// it could not be read.
func CheckDescriptor(source string, out io.Writer) (noDefects bool, err error) {
	d, err := LoadDescriptor(source)
	var defects *descriptor.Defects
	if errors.As(err, &defects) {
		fmt.Fprintln(out, err)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	likely := d.LikelyDefects()
	switch len(likely) {
	case 0:
		fmt.Fprintf(out, "%s: no defects; %s\n", source, summarize(d))
	case 1:
		fmt.Fprintf(out, "%s: 1 likely defect; %s\n", source, summarize(d))
	default:
		fmt.Fprintf(out, "%s: %d likely defects; %s\n", source, len(likely), summarize(d))
	}
	for _, l := range likely {
		fmt.Fprintf(out, "  likely defect: %s\n", l)
	}
	for _, m := range d.FileFormats {
		fmt.Fprintf(out, "  custom-file-format %-20s %s  (limits and contract)\n", m.Key, m.URL)
	}
	for _, m := range d.PreExports {
		fmt.Fprintf(out, "  file-pre-export    %-20s %s  (limits and contract)\n", m.Key, m.URL)
	}
	for _, m := range d.Webhooks {
		fmt.Fprintf(out, "  webhook            %-20s %s  (signature, module key, events %v)\n", m.Key, m.URL, m.Events)
	}
	for _, m := range d.Others {
		fmt.Fprintf(out, "  %-18s %-20s %s  (token, like every other path)\n", m.Kind, m.Key, m.URL)
	}
	return len(likely) == 0, nil
}

func summarize(d *descriptor.Descriptor) string {
	s := fmt.Sprintf("%d file format, %d pre-export and %d webhook modules", len(d.FileFormats), len(d.PreExports), len(d.Webhooks))
	if len(d.Others) > 0 {
		s += fmt.Sprintf(", %d other (%s)", len(d.Others), strings.Join(d.Ignored, ", "))
	}
	if d.Identifier != "" {
		s = "app " + strconv.Quote(d.Identifier) + ", " + s
	}
	return s
}

// SendOptions are what caddy service-app send calls, and how.
type SendOptions struct {
	// Descriptor is the app descriptor: a file or an address.
	Descriptor string
	// App is the app's base address as the service reaches it.
	App string
	// Secret is the app secret that signs deliveries.
	Secret string
	// Domain and OrganizationID name the organization.
	Domain         string
	OrganizationID int64
	// File is a source file for the file jobs; without it only events
	// are sent.
	File string
	// Only is "events", "jobs", or "" for both.
	Only string
	// Timeout bounds the wait for each answer.
	Timeout time.Duration
}

// SendToApp calls every module the descriptor declares at the app, as the
// service does, and prints one line per call, then how many were answered
// 2xx. all2xx is false when a call was not; err is set when no call could
// be made.
func SendToApp(o SendOptions, out io.Writer) (all2xx bool, err error) {
	if o.Only != "" && o.Only != "events" && o.Only != "jobs" {
		return false, fmt.Errorf("--only takes events or jobs, not %q", o.Only)
	}
	d, err := LoadDescriptor(o.Descriptor)
	if err != nil {
		return false, err
	}
	challenges := newTokenChallenges()
	in := &emulator.Installation{
		Descriptor: d, AppURL: o.App, AppSecret: o.Secret,
		OrganizationID: o.OrganizationID, Domain: o.Domain,
		Client: &http.Client{Timeout: o.Timeout, Transport: challenges},
	}
	calls, err := o.calls(context.Background(), in)
	if err != nil {
		return false, err
	}
	failed, hint := 0, ""
	for _, c := range calls {
		if c.Kind == descriptor.KindWebhook && hint == "" {
			hint = demoSecretHint(c.Status, o.Secret, challenges.asked(c.URL))
		}
		line := fmt.Sprintf("%-18s %-20s %-15s %s", c.Kind, c.Key, c.Job, c.URL)
		if c.Err != nil {
			fmt.Fprintf(out, "%s  no answer: %v\n", line, c.Err)
		} else {
			fmt.Fprintf(out, "%s  %d %s\n", line, c.Status, answerSummary(c.Body))
		}
		if !c.OK() {
			failed++
		}
	}
	if hint != "" {
		fmt.Fprintln(out, hint)
	}
	if failed > 0 {
		fmt.Fprintf(out, "%d of %d calls were not answered 2xx\n", failed, len(calls))
		return false, nil
	}
	fmt.Fprintf(out, "all %d calls were answered 2xx\n", len(calls))
	return true, nil
}

// calls sends the events, then the jobs of File, as Only asks.
func (o SendOptions) calls(ctx context.Context, in *emulator.Installation) ([]emulator.Call, error) {
	var calls []emulator.Call
	if o.Only != "jobs" {
		calls = append(calls, in.SendEvents(ctx)...)
	}
	if o.Only != "events" {
		if o.File == "" && o.Only == "jobs" {
			return nil, errors.New("--only jobs needs --file, the source file of the jobs")
		}
		if o.File != "" {
			content, err := os.ReadFile(o.File)
			if err != nil {
				return nil, fmt.Errorf("reading the source file: %w", err)
			}
			calls = append(calls, in.SendJobs(ctx, filepath.Base(o.File), content)...)
		}
	}
	if len(calls) == 0 {
		return nil, errors.New("the descriptor declares no module to call")
	}
	return calls, nil
}
