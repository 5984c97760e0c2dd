// Command bench measures servicegate's handlers against Caddy's plain
// reverse_proxy on this machine and writes the results into BENCHMARKS.md.
//
// Run it from anywhere inside the repository:
//
//	go run ./bench              # full run: 5 rounds x 10 s per side, every chain
//	go run ./bench -quick       # self-check: 1 round x 2 s, results to bench/out
//	go run ./bench -only auth,webhook-1k -rounds 9
//
// It builds bench/out/caddy and bench/out/upstream, writes one Caddyfile per
// side of each chain into bench/out, and drives them with wrk (and, for the
// 5 MB cases, with a Go client). Everything listens on 127.0.0.1 only, on
// ports from -port-base on (18000 by default). See BENCHMARKS.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// options are the command-line settings of one run.
type options struct {
	rounds      int
	duration    time.Duration
	connections int
	threads     int
	only        []string
	quick       bool
	profile     bool // a CPU profile of each side during the last wrk round
	pin         bool // each Caddy on a core of its own
	sideBySide  bool // both sides loaded at once in each round
	install     bool
	out         string
	goBench     bool
	benchTime   string
	seqRequests int
	portBase    int
	command     string
	// replicaFsync is the appendfsync of a durable chain's Redis replica.
	replicaFsync string
}

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		logf("%v: stopping Caddy and the upstream", sig)
		stopAll()
		os.Exit(130)
	}()
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench: "+err.Error())
		os.Exit(1)
	}
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	chains, err := selectChains(o.only)
	if err != nil {
		return err
	}
	if needsWrk(chains) {
		if err := ensureTool("wrk", "wrk", o.install); err != nil {
			return err
		}
	}
	outDir := filepath.Join(root, "bench", "out")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	p := newPorts(o.portBase)
	if err := p.checkFree(); err != nil {
		return err
	}

	logf("building bench/out/caddy and bench/out/upstream")
	if err := goCmd("build", "-o", filepath.Join(outDir, "caddy"), "./cmd/caddy"); err != nil {
		return fmt.Errorf("building caddy: %w", err)
	}
	if err := goCmd("build", "-o", filepath.Join(outDir, "upstream"), "./bench/upstream"); err != nil {
		return fmt.Errorf("building the upstream: %w", err)
	}

	env := &benchEnv{opts: o, root: root, out: outDir, ports: p, caddyBin: filepath.Join(outDir, "caddy")}
	if o.pin {
		if env.pinning, err = pin(); err != nil {
			return err
		}
	}
	for _, c := range chains {
		if c.redis {
			if err := ensureTool("redis-server", "redis-server", o.install); err != nil {
				env.noRedis = err.Error()
			}
			break
		}
	}
	up, err := startUpstream(env)
	if err != nil {
		return err
	}
	defer up.stop()

	res := &report{started: time.Now().UTC(), opts: o, cpuStart: markCPU()}
	res.machine = describeMachine(env.caddyBin)
	failed := 0
	for _, c := range chains {
		logf("chain %s: %s", c.name, c.title)
		r := c.run(env)
		if r.err != nil {
			failed++
			logf("chain %s FAILED: %v", c.name, r.err)
		} else if r.skip != "" {
			logf("chain %s SKIPPED: %s", c.name, r.skip)
		}
		res.chains = append(res.chains, r)
	}
	up.stop() // so that its CPU time counts as the bench's own
	res.cpuEnd = markCPU()
	if o.goBench {
		logf("go test benchmarks (token, signature, subscription, caddymodule)")
		res.goBench, res.goBenchErr = runGoBench(env)
		if res.goBenchErr != nil {
			failed++
			logf("go test benchmarks FAILED: %v", res.goBenchErr)
		}
	}
	res.finished = time.Now().UTC()

	section := res.markdown()
	if err := writeResults(o.out, section); err != nil {
		return err
	}
	logf("results written to %s", o.out)
	fmt.Println(section)
	if failed > 0 {
		return fmt.Errorf("%d part(s) of the run failed; see the messages above and the logs in bench/out", failed)
	}
	return nil
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	o := &options{}
	only := fs.String("only", "", "comma-separated chains to run (default: all servicegate chains); names: "+strings.Join(chainNames(), ", "))
	fs.IntVar(&o.rounds, "rounds", 5, "A/B rounds per chain")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of one measurement (one side of one round)")
	fs.IntVar(&o.connections, "connections", 32, "wrk connections")
	fs.IntVar(&o.threads, "threads", 2, "wrk threads")
	fs.BoolVar(&o.quick, "quick", false, "self-check: 1 round of 2 s, short go benchmarks, results to bench/out/results-quick.md")
	fs.BoolVar(&o.install, "install", false, "install wrk (and redis-server, for the chains that need it) with apt-get when missing (needs root; implied by CI=true)")
	fs.StringVar(&o.out, "out", "", "markdown file to write the results section into (default BENCHMARKS.md, or bench/out/results-quick.md with -quick)")
	fs.BoolVar(&o.goBench, "gobench", true, "also run go test -bench over token, signature, subscription and caddymodule")
	fs.StringVar(&o.benchTime, "benchtime", "1s", "go test -benchtime")
	fs.IntVar(&o.seqRequests, "seq-requests", 10, "requests per side per round for the sequential chains (webhook-5m, contract-5m)")
	fs.BoolVar(&o.profile, "profile", false, "take a CPU profile of each side's Caddy (its admin API's /debug/pprof/profile) during the last wrk round, into bench/out/<chain>-<side>.pprof")
	fs.BoolVar(&o.sideBySide, "side-by-side", false, "load both sides at once in each round, each from a wrk of its own with half the threads and connections (chains without a drain), rather than one after the other")
	fs.BoolVar(&o.pin, "pin", false, "run each side's Caddy on a core of its own (the last), with GOMAXPROCS=1, and everything else on the other cores")
	fs.IntVar(&o.portBase, "port-base", 18000, "first of the loopback ports used (base+1 … base+460)")
	fs.StringVar(&o.replicaFsync, "replica-appendfsync", "always", "appendfsync of the bench's Redis replica, in the replicas chains (always, everysec or no); its primary syncs always")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.quick {
		if !set["rounds"] {
			o.rounds = 1
		}
		if !set["duration"] {
			o.duration = 2 * time.Second
		}
		if !set["benchtime"] {
			o.benchTime = "100ms"
		}
		if !set["seq-requests"] {
			o.seqRequests = 3
		}
		if !set["out"] {
			o.out = filepath.Join("bench", "out", "results-quick.md")
		}
	}
	if o.out == "" {
		o.out = "BENCHMARKS.md" // in the repository root, where the run works
	} else if set["out"] {
		// The run moves to the repository root: keep -out where the user meant.
		abs, err := filepath.Abs(o.out)
		if err != nil {
			return nil, err
		}
		o.out = abs
	}
	if *only != "" {
		for _, n := range strings.Split(*only, ",") {
			if n = strings.TrimSpace(n); n != "" {
				o.only = append(o.only, n)
			}
		}
	}
	switch {
	case o.rounds < 1:
		return nil, fmt.Errorf("-rounds must be at least 1")
	case o.duration < time.Second:
		return nil, fmt.Errorf("-duration must be at least 1s")
	case o.connections < 1 || o.threads < 1 || o.threads > o.connections:
		return nil, fmt.Errorf("-connections and -threads must be positive, threads <= connections")
	case o.seqRequests < 1:
		return nil, fmt.Errorf("-seq-requests must be at least 1")
	case o.portBase < 1024 || o.portBase+500 > 65535:
		return nil, fmt.Errorf("-port-base must leave room for 500 ports between 1024 and 65535")
	case o.replicaFsync != "always" && o.replicaFsync != "everysec" && o.replicaFsync != "no":
		return nil, fmt.Errorf("-replica-appendfsync must be always, everysec or no, not %q", o.replicaFsync)
	}
	o.command = "go run ./bench"
	if len(args) > 0 {
		o.command += " " + strings.Join(args, " ")
	}
	return o, nil
}

// repoRoot finds the directory of servicegate's go.mod from the working
// directory upwards.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/servicegate/servicegate\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run this inside the servicegate repository (no go.mod of github.com/servicegate/servicegate above %s)", dir)
		}
		dir = parent
	}
}

// needsWrk tells whether any of chains is loaded by wrk: the sequential
// and concurrent ones are loaded by the bench itself.
func needsWrk(chains []*chain) bool {
	for _, c := range chains {
		if c.load == loadWrk {
			return true
		}
	}
	return false
}

// ensureTool checks that the program bin is installed, and installs the
// Debian package pkg with apt-get when asked to (or on CI) and running as
// root.
func ensureTool(bin, pkg string, install bool) error {
	if _, err := exec.LookPath(bin); err == nil {
		return nil
	}
	if !(install || os.Getenv("CI") == "true") || os.Geteuid() != 0 {
		return fmt.Errorf("%s is not installed: run `apt-get install -y %s` (or rerun as root with -install)", bin, pkg)
	}
	logf("%s is missing: installing it with apt-get", bin)
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", pkg}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", strings.Join(args, " "), err)
		}
	}
	if _, err := exec.LookPath(bin); err != nil {
		return fmt.Errorf("%s still not found after apt-get install %s: %w", bin, pkg, err)
	}
	return nil
}

func goCmd(args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
