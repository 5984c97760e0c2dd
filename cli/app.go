package cli

import (
	"bytes"
	"context"
	"encoding/json"
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
	// Emulator is the emulated service's address: the calls go through
	// it, so that its console shows them.
	Emulator string
	// Secret is the app secret that signs deliveries when the
	// organization has no installation in the emulator; an
	// installation's own secret signs them otherwise.
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

// SendToApp asks the emulator to call every module the descriptor
// declares at the app, as the service does, and prints one line per
// call, then how many were answered 2xx. all2xx is false when a call was
// not; err is set when no call could be made.
func SendToApp(o SendOptions, out io.Writer) (all2xx bool, err error) {
	if o.Only != "" && o.Only != "events" && o.Only != "jobs" {
		return false, fmt.Errorf("--only takes events or jobs, not %q", o.Only)
	}
	loaded, err := (&descriptor.Loader{}).Load(context.Background(), o.Descriptor)
	if err != nil {
		return false, err
	}
	d := loaded.Descriptor
	req := emulator.SendRequest{Descriptor: loaded.Data, Source: o.Descriptor, App: o.App, Organization: o.Domain,
		OrganizationID: o.OrganizationID, Secret: o.Secret, Only: o.Only, Timeout: o.Timeout.String()}
	if o.File == "" && o.Only == "jobs" {
		return false, errors.New("--only jobs needs --file, the source file of the jobs")
	}
	if o.File != "" && o.Only != "events" {
		content, err := os.ReadFile(o.File)
		if err != nil {
			return false, fmt.Errorf("reading the source file: %w", err)
		}
		req.File = &emulator.SendFile{Name: filepath.Base(o.File), Content: content}
	}
	events := o.Only != "jobs" && len(d.Webhooks) > 0
	jobs := req.File != nil && len(d.FileFormats)+len(d.PreExports) > 0
	if !events && !jobs {
		return false, errors.New("the descriptor declares no module to call")
	}
	var answer emulator.SendAnswer
	calls := len(d.Webhooks) + 2*len(d.FileFormats) + len(d.PreExports)
	if err := askEmulator(o.Emulator, emulator.APIPrefix+"send", req, time.Duration(calls+1)*o.Timeout, &answer); err != nil {
		return false, err
	}
	failed, hint := 0, ""
	for _, c := range answer.Calls {
		if c.Kind == descriptor.KindWebhook && hint == "" && !answer.Installed {
			hint = demoSecretHint(c.Status, o.Secret, c.TokenChallenge)
		}
		line := fmt.Sprintf("%-18s %-20s %-15s %s", c.Kind, c.Key, c.Job, c.URL)
		if c.Error != "" {
			fmt.Fprintf(out, "%s  no answer: %s\n", line, c.Error)
		} else {
			fmt.Fprintf(out, "%s  %d %s\n", line, c.Status, answerSummary([]byte(c.Answer)))
		}
		if c.Error != "" || c.Status < 200 || c.Status > 299 {
			failed++
		}
	}
	if hint != "" {
		fmt.Fprintln(out, hint)
	}
	if failed > 0 {
		fmt.Fprintf(out, "%d of %d calls were not answered 2xx\n", failed, len(answer.Calls))
		return false, nil
	}
	fmt.Fprintf(out, "all %d calls were answered 2xx\n", len(answer.Calls))
	return true, nil
}

// askEmulator POSTs req as JSON to path at the emulator and decodes its
// answer into out; an answer other than 200 is an error with the
// emulator's message.
func askEmulator(address, path string, req any, timeout time.Duration, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: timeout}
	resp, err := client.Post(strings.TrimSuffix(address, "/")+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("asking the emulator at %s (the calls go through it; run a site with service_emulator, or name it with --emulator): %w", address, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		var msg struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &msg) == nil && msg.Message != "" {
			return fmt.Errorf("the emulator answered %d: %s", resp.StatusCode, msg.Message)
		}
		return fmt.Errorf("the emulator answered %d: %s", resp.StatusCode, answerSummary(raw))
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("the emulator's answer could not be read: %w", err)
	}
	return nil
}
