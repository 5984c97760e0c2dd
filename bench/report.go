package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The results section of BENCHMARKS.md lies between these two lines; a
// run replaces it and keeps the rest of the file.
const (
	resultsStart = "<!-- bench:results:start -->"
	resultsEnd   = "<!-- bench:results:end -->"
)

type report struct {
	started, finished time.Time
	cpuStart, cpuEnd  cpuMark // around the chains
	opts              *options
	machine           machine
	chains            []*chainResult
	goBench           string
	goBenchErr        error
}

type machine struct {
	cpus          int
	cpuModel      string
	memory        string
	goVersion     string
	caddyVersion  string
	wrkVersion    string
	kernelRelease string
}

func describeMachine(caddyBin string) machine {
	m := machine{cpus: runtime.NumCPU(), cpuModel: "unknown", memory: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpuModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					m.memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
				}
			}
		}
	}
	m.goVersion = firstLine(exec.Command("go", "version"))
	m.caddyVersion, _, _ = strings.Cut(firstLine(exec.Command(caddyBin, "version")), " ")
	m.wrkVersion, _, _ = strings.Cut(firstLine(exec.Command("wrk", "--version")), " [")
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernelRelease = strings.TrimSpace(string(b))
	}
	return m
}

func firstLine(cmd *exec.Cmd) string {
	out, _ := cmd.CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if line == "" {
		return "unknown"
	}
	return line
}

// goBenchPackages are the packages whose Go benchmarks the run records.
var goBenchPackages = []string{"./token", "./signature", "./subscription", "./caddymodule"}

// runGoBench runs the packages' Go benchmarks one package at a time, so
// that one that does not build leaves the others' numbers; the
// caddymodule package may start a Caddy, so it gets ports of this run.
func runGoBench(env *benchEnv) (string, error) {
	p := env.ports
	var all bytes.Buffer
	var failed []string
	for _, pkg := range goBenchPackages {
		cmd := exec.Command("go", "test", "-run", "^$", "-bench", ".", "-benchmem",
			"-benchtime", env.opts.benchTime, "-timeout", "20m", pkg)
		cmd.Env = append(os.Environ(),
			fmt.Sprintf("SERVICEGATE_E2E_ADMIN_PORT=%d", p.testAdmin),
			fmt.Sprintf("SERVICEGATE_E2E_HTTP_PORT=%d", p.testHTTP),
			fmt.Sprintf("SERVICEGATE_E2E_HTTPS_PORT=%d", p.testS),
		)
		out, err := cmd.CombinedOutput()
		all.Write(out)
		if err != nil {
			failed = append(failed, pkg)
		}
	}
	_ = os.WriteFile(filepath.Join(env.out, "gobench.txt"), all.Bytes(), 0o644)
	if len(failed) > 0 {
		return all.String(), fmt.Errorf("go test -bench failed in %s (output in bench/out/gobench.txt)", strings.Join(failed, ", "))
	}
	return all.String(), nil
}

func mib(b int64) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// paired pairs round i of both sides (measured one right after the other)
// and gives f of each pair: less sensitive to a machine whose load changes
// during the run than a ratio of medians.
func paired(r *chainResult, f func(plain, chain wrkStats, cpuPlain, cpuChain float64) (float64, bool)) []float64 {
	var v []float64
	for i := range r.plain.runs {
		if i >= len(r.chain.runs) || i >= len(r.plain.cpuUS) || i >= len(r.chain.cpuUS) {
			break
		}
		if x, ok := f(r.plain.runs[i], r.chain.runs[i], r.plain.cpuUS[i], r.chain.cpuUS[i]); ok {
			v = append(v, x)
		}
	}
	return v
}

// pairedRatios is the paired ratio of requests/s, chain over plain.
func pairedRatios(r *chainResult) []float64 {
	return paired(r, func(p, c wrkStats, _, _ float64) (float64, bool) {
		return c.rps() / p.rps(), p.rps() > 0
	})
}

// pairedP50Ratios is the paired ratio of p50 latency, chain over plain.
func pairedP50Ratios(r *chainResult) []float64 {
	return paired(r, func(p, c wrkStats, _, _ float64) (float64, bool) {
		return c.P50 / p.P50, p.P50 > 0
	})
}

// pairedCPURatios is the paired ratio of Caddy CPU per request, plain over
// chain: 0.97 means the chain's Caddy spent 1/0.97 as much per request.
func pairedCPURatios(r *chainResult) []float64 {
	return paired(r, func(_, _ wrkStats, p, c float64) (float64, bool) {
		return p / c, c > 0 && p > 0
	})
}

// medianRange is v's median, lowest and highest values.
func medianRange(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%.3f (%.3f–%.3f)", median(v), lo, hi)
}

// cpuMark is a point in time of the machine's busy CPU time and of the
// CPU time of this process and its waited-for children (Caddy, wrk, the
// upstream), both in seconds.
type cpuMark struct {
	at         time.Time
	busy, ours float64
	steal      float64 // of busy: time the hypervisor gave to other machines
}

// userHZ is the unit of /proc/stat, fixed at 100 on Linux.
const userHZ = 100

func markCPU() cpuMark {
	m := cpuMark{at: time.Now(), busy: -1}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		m.busy, m.steal = parseProcStat(string(b))
	}
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			m.ours += float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
		}
	}
	return m
}

// parseProcStat reads the first line of /proc/stat: the busy time of all
// CPUs and, of it, the time the hypervisor gave to other machines
// (steal), in seconds; -1 and -1 when the line is not one.
func parseProcStat(stat string) (busy, steal float64) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return -1, -1
	}
	// user nice system idle iowait irq softirq steal: all but idle and iowait.
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		x, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return -1, -1
		}
		busy += x
		if i == 8 {
			steal = x
		}
	}
	return busy / userHZ, steal / userHZ
}

// stealShare is the share of the machine's CPU time between a and b that
// the hypervisor gave to other machines, or -1 when unknown.
func stealShare(a, b cpuMark, cpus int) float64 {
	wall := b.at.Sub(a.at).Seconds()
	if a.steal < 0 || b.steal < 0 || wall <= 0 || cpus <= 0 {
		return -1
	}
	return max(b.steal-a.steal, 0) / (wall * float64(cpus))
}

// otherShare is the share of the machine's CPU time that other processes
// used between two marks, or -1 when unknown.
func otherShare(a, b cpuMark, cpus int) float64 {
	wall := b.at.Sub(a.at).Seconds()
	if a.busy < 0 || b.busy < 0 || wall <= 0 || cpus <= 0 {
		return -1
	}
	other := (b.busy - a.busy) - (b.ours - a.ours)
	return max(other, 0) / (wall * float64(cpus))
}

func (rep *report) markdown() string {
	var b strings.Builder
	o := rep.opts
	m := rep.machine
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	w("## Results\n\n")
	w("Measured %s UTC, %s, with:\n\n```sh\n%s\n```\n\n", rep.started.Format("2006-01-02 15:04"), rep.finished.Sub(rep.started).Round(time.Second), o.command)
	w("- Machine: %d cores (`nproc`), %s, %s memory, Linux %s\n", m.cpus, m.cpuModel, m.memory, m.kernelRelease)
	w("- %s; Caddy %s; %s\n", m.goVersion, m.caddyVersion, m.wrkVersion)
	switch {
	case o.sideBySide:
		w("- %d round(s) × %s, both sides loaded at once in each round (`-side-by-side`), each by a wrk of its own with -t%d -c%d (the queue chains one after the other, wrk -t%d -c%d)\n",
			o.rounds, o.duration, max(o.threads/2, 1), max(o.connections/2, 1), o.threads, o.connections)
	case o.pin:
		w("- %d round(s) × %s per side, alternating; wrk -t%d -c%d; each Caddy on the last core with GOMAXPROCS=1 (`-pin`), wrk, the upstream and the bench on the other %d\n",
			o.rounds, o.duration, o.threads, o.connections, m.cpus-1)
	default:
		w("- %d round(s) × %s per side, alternating; wrk -t%d -c%d; wrk, both Caddys and the upstream share the %d cores, nothing is pinned\n",
			o.rounds, o.duration, o.threads, o.connections, m.cpus)
	}
	other := otherShare(rep.cpuStart, rep.cpuEnd, m.cpus)
	steal := stealShare(rep.cpuStart, rep.cpuEnd, m.cpus)
	if other >= 0 && steal >= 0 {
		other = max(other-steal, 0)
	}
	if other < 0 {
		w("- CPU time of other processes during the chains: unknown\n")
	} else {
		w("- Other processes used %.0f%% of the machine's CPU time during the chains\n", other*100)
	}
	if steal >= 0 {
		w("- The hypervisor gave %.0f%% of this machine's CPU time to other machines (steal, from `/proc/stat`)\n", steal*100)
	}
	w("\n")
	if other > 0.10 || steal > 0.05 {
		w("**The machine was busy with other work during this run: the ratios are noisy. Rerun on a quiet machine before reading a MISS as a regression.**\n\n")
	}

	var errs []string
	var thr, seq, conc []*chainResult
	for _, r := range rep.chains {
		switch {
		case r.err != nil:
			errs = append(errs, fmt.Sprintf("- **%s**: NOT MEASURED: %s", r.c.name, oneLine(r.err.Error())))
		case r.skip != "":
			errs = append(errs, fmt.Sprintf("- **%s**: SKIPPED: %s", r.c.name, oneLine(r.skip)))
		case r.c.load == loadWrk:
			thr = append(thr, r)
		case r.c.load == loadSequential:
			seq = append(seq, r)
		default:
			conc = append(conc, r)
		}
	}

	if len(thr) > 0 {
		w("### Throughput against plain `reverse_proxy`\n\n")
		w("| chain | body | Caddy CPU per request plain → chain | added | CPU ratio plain / chain, paired median (range) | goal | result | plain req/s | chain req/s | req/s ratio, paired median (range) | p50 plain → chain | p99 plain → chain | peak RSS plain / chain |\n")
		w("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		var acks []string
		for _, r := range thr {
			pc, cc := r.plain.medianCPU(), r.chain.medianCPU()
			cpu := pairedCPURatios(r)
			goal, result := "–", "info"
			switch r.c.goal {
			case goalCPU:
				goal = fmt.Sprintf("≥ %.2f", r.c.target)
				result = verdict(len(cpu) > 0 && median(cpu) >= r.c.target)
			case goalAcks:
				goal = fmt.Sprintf("req/s ≥ %.2f, p50 ≤ %.1f×", r.c.target, relP50Target)
				rps, p50 := pairedRatios(r), pairedP50Ratios(r)
				result = verdict(len(rps) > 0 && median(rps) >= r.c.target && median(p50) <= relP50Target)
				acks = append(acks, fmt.Sprintf("- %s: requests/s chain over plain, paired median %s (goal ≥ %.2f); p50 chain over plain, paired median %s (goal ≤ %.1f×): %s",
					r.c.name, medianRange(rps), r.c.target, medianRange(p50), relP50Target, result))
			}
			w("| %s | %s | %.1f µs → %.1f µs | %+.1f µs | %s | %s | %s | %.0f | %.0f | %s | %s → %s | %s → %s | %s / %s |\n",
				r.c.name, sizeLabel(r.bodySize), pc, cc, cc-pc, medianRange(cpu), goal, result,
				r.plain.medianRPS(), r.chain.medianRPS(), medianRange(pairedRatios(r)),
				fmtUS(r.plain.medianP(false)), fmtUS(r.chain.medianP(false)),
				fmtUS(r.plain.medianP(true)), fmtUS(r.chain.medianP(true)),
				mib(r.plain.peakRSS), mib(r.chain.peakRSS))
		}
		pairs := "each pair two rounds measured one right after the other (ABBA order)"
		if o.sideBySide {
			pairs = "each pair the two sides of one round, loaded at once"
		}
		if len(acks) > 0 {
			w("\n%s\n", strings.Join(acks, "\n"))
		}
		w("\nCaddy CPU per request is the CPU time (user and system, from `/proc/<pid>/stat`) of that side's Caddy during a round divided by the requests of that round; the table gives the median over the rounds and the difference of the medians. The result compares the goal with the median of the paired ratios, plain's CPU per request over the chain's, %s: the requests/s a round reaches move with whatever else the machine does, and the CPU each request costs moves far less. p50 and p99 are medians over the rounds.\n\n", pairs)
	}
	b.WriteString(queueSection(rep.chains))
	if len(seq) > 0 {
		w("### Large bodies, one at a time (added time against plain)\n\n")
		w("| chain | body | median plain | median chain | added | reference alone | added / reference | straight to the app | peak RSS plain / chain | goal | result |\n")
		w("|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range seq {
			pl, cl := r.plain.medianLatency(), r.chain.medianLatency()
			added := cl - pl
			sha, x, direct, goal, result := "–", "–", "–", "–", "info"
			if r.c.goal == goalSHA && r.sha256 > 0 {
				ratio := float64(added) / float64(r.sha256)
				sha, x = ms(r.sha256), fmt.Sprintf("%.2f×", ratio)
				goal, result = fmt.Sprintf("≤ %.1f×", r.c.target), verdict(ratio <= r.c.target)
			}
			if r.c.goal == goalJSONValid && r.jsonValid > 0 {
				sha, x = ms(r.jsonValid)+" (json.Valid)", fmt.Sprintf("%.2f×", float64(added)/float64(r.jsonValid))
			}
			if d := r.direct.medianLatency(); d > 0 {
				direct = ms(d)
			}
			w("| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s |\n",
				r.c.name, bodyLabel(r), ms(pl), ms(cl), ms(added), sha, x, direct,
				mib(r.plain.peakRSS), mib(r.chain.peakRSS), goal, result)
		}
		w("\n%d requests per side per round (fewer when a round passed -duration); medians over all rounds. The reference is, for the chains held to it, the time SHA-256 takes over the body in the bench process; for the contract's chains, the time encoding/json.Valid takes there over what the contract checks (the answer, and for contract-ndjson-5m the strings file, a line at a time), given for information: the added time also holds the answer's buffering and copies, which the check alone (`go test ./contract -bench Ratio`, held to 0.5 of json.Valid) leaves out. Straight to the app is the median time of the same request sent by the bench to the upstream with no Caddy between, in the same rounds: one trip of the body over loopback to the app, which a chain that must hold the whole body before the app gets its first byte cannot overlap with the receiving, as plain `reverse_proxy` does.\n\n", o.seqRequests)
	}
	if len(conc) > 0 {
		w("### Memory under 20 concurrent 5 MB jobs\n\n")
		w("| chain | job → answer | jobs plain | jobs chain | peak RSS plain | peak RSS chain | difference |\n")
		w("|---|---|---|---|---|---|---|\n")
		for _, r := range conc {
			w("| %s | %s | %d | %d | %s | %s | %s |\n", r.c.name, bodyLabel(r), r.plain.jobs, r.chain.jobs,
				mib(r.plain.peakRSS), mib(r.chain.peakRSS), fmt.Sprintf("%+.0f MiB", float64(r.chain.peakRSS-r.plain.peakRSS)/(1<<20)))
		}
		w("\nPeak RSS is VmHWM of each side's Caddy process over the whole chain (one process per side per chain).\n\n")
	}
	if len(errs) > 0 {
		w("### Not measured\n\n%s\n\n", strings.Join(errs, "\n"))
	}
	var notes []string
	for _, r := range rep.chains {
		for _, n := range r.notes {
			notes = append(notes, fmt.Sprintf("- %s: %s", r.c.name, n))
		}
	}
	if len(notes) > 0 {
		w("### Notes\n\n%s\n\n", strings.Join(notes, "\n"))
	}
	if o.goBench {
		w("### Go benchmarks\n\nEach package on its own:\n\n```sh\ngo test -run '^$' -bench . -benchmem -benchtime %s <package>   # %s\n```\n\n", o.benchTime, strings.Join(goBenchPackages, " "))
		if rep.goBenchErr != nil {
			w("FAILED: %s\n\n", oneLine(rep.goBenchErr.Error()))
		}
		w("```text\n%s\n```\n", strings.TrimSpace(rep.goBench))
	}
	return b.String()
}

// bodyLabel is the size of the request's body, and of the answer when the
// upstream does not echo the body and answers with more than a small JSON
// document: "1 KiB → 5.0 MB".
func bodyLabel(r *chainResult) string {
	if r.c.echo {
		return sizeLabel(r.bodySize) + " echoed"
	}
	if r.answerSize >= size100K {
		return sizeLabel(r.bodySize) + " → " + sizeLabel(r.answerSize)
	}
	return sizeLabel(r.bodySize)
}

func sizeLabel(n int) string {
	switch {
	case n == 0:
		return "–"
	case n >= 1_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1024:
		return fmt.Sprintf("%.0f KiB", float64(n)/1024)
	default:
		return fmt.Sprintf("%d B", n)
	}
}

// oneLine keeps an error message on one table-friendly line.
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ⏎ ")
	if len(s) > 1200 {
		s = s[:1200] + "…"
	}
	return s
}

// writeResults puts section between the results markers of path, keeping
// everything else; a file without markers gets them appended.
func writeResults(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(replaceResults(string(old), section)), 0o644)
}

func replaceResults(doc, section string) string {
	block := resultsStart + "\n" + strings.TrimSpace(section) + "\n" + resultsEnd + "\n"
	i := strings.Index(doc, resultsStart)
	j := -1
	if i >= 0 {
		if k := strings.Index(doc[i:], resultsEnd); k >= 0 {
			j = i + k
		}
	}
	if j < 0 {
		if doc != "" && !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		if doc != "" {
			doc += "\n"
		}
		return doc + block
	}
	rest := strings.TrimPrefix(doc[j+len(resultsEnd):], "\n")
	return doc[:i] + block + rest
}
