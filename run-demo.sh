#!/usr/bin/env bash
# Builds Caddy with servicegate and the demo app, starts the demo app, and
# runs Caddy with Caddyfile.example. Once Caddy serves, it prints the
# addresses to open; Caddy's log goes to bin/caddy.log. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p bin

# build <output> <package>: go build, showing the packages compiled as it
# goes (none when the build cache already holds them), and the compiler's
# messages when it fails.
build() {
	local out=$1 pkg=$2 log n pid
	log=$(mktemp)
	go build -v -o "$out" "$pkg" 2>"$log" &
	pid=$!
	local s=0
	while kill -0 "$pid" 2>/dev/null; do
		if [ -t 1 ]; then
			printf '\rbuilding %s: %d packages compiled' "$out" "$(wc -l <"$log")"
		elif [ $((s % 15)) -eq 14 ]; then
			# Not a terminal (a CI log, say): a line every 15 seconds.
			echo "building $out: $(wc -l <"$log") packages compiled so far"
		fi
		s=$((s + 1))
		sleep 1
	done
	if ! wait "$pid"; then
		[ -t 1 ] && echo
		echo "building $out failed:" >&2
		grep -v '^[a-zA-Z0-9_./-]*$' "$log" >&2 || cat "$log" >&2
		rm -f "$log"
		return 1
	fi
	n=$(wc -l <"$log")
	rm -f "$log"
	local what="$n packages compiled"
	[ "$n" -eq 0 ] && what="up to date"
	if [ -t 1 ]; then
		printf '\rbuilding %s: %s, done\n' "$out" "$what"
	else
		echo "built $out ($what)"
	fi
}

echo "building bin/caddy and bin/demoapp (the first build compiles a few hundred packages and takes a few minutes)"
build bin/caddy ./cmd/caddy
build bin/demoapp ./examples/demoapp

# Caddyfile.example reads its secrets from the environment when the config
# loads, so none stands in Caddy's saved config. Each one not set is given
# a DEMO value, good for this machine only (the defaults of caddy
# service-token and service-webhook).
export CLIENT_SECRET="${CLIENT_SECRET:-demo-client-secret}"
export APP_SECRET="${APP_SECRET:-demo-app-secret}"
export SERVICEGATE_INSTALLATIONS_KEY="${SERVICEGATE_INSTALLATIONS_KEY:-demo-installations-key-32-bytes!}"

app="" caddy=""
stop() {
	# Background commands of a script ignore Ctrl-C: stop them here.
	[ -n "$caddy" ] && kill "$caddy" 2>/dev/null && wait "$caddy" 2>/dev/null
	[ -n "$app" ] && kill "$app" 2>/dev/null
	return 0
}
trap stop EXIT
trap 'exit 130' INT TERM

bin/demoapp -listen 127.0.0.1:3000 >bin/demoapp.log 2>&1 &
app=$!
# service_app reads the app's descriptor from the app: wait until it answers.
for _ in $(seq 50); do
	bin/caddy service-app check http://127.0.0.1:3000/manifest.json >/dev/null 2>&1 && break
	sleep 0.2
done

log=bin/caddy.log
echo "starting Caddy with Caddyfile.example (its log: $log)"
bin/caddy run --config Caddyfile.example --adapter caddyfile >"$log" 2>&1 &
caddy=$!

# listens <port>: something accepts connections on 127.0.0.1:<port>.
listens() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

until listens 8080 && listens 8081; do
	if ! kill -0 "$caddy" 2>/dev/null; then
		echo "Caddy stopped before it served; the end of $log:" >&2
		tail -n 20 "$log" >&2
		exit 1
	fi
	sleep 0.2
done

cat <<EOF

servicegate's demo is running; Ctrl-C stops it.
  console   http://localhost:8081/emulator/console   every call to the app, live
  app       http://localhost:8080                    the demo app, behind servicegate
  emulator  http://localhost:8081                    stands in for the service
Caddy's log: $log (tail -f $log); the demo app's: bin/demoapp.log
EOF
wait "$caddy"
