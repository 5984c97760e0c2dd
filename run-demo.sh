#!/usr/bin/env bash
# Builds Caddy with servicegate and the demo app, starts the demo app, and
# runs Caddy with Caddyfile.example in the foreground. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p bin
echo "building bin/caddy and bin/demoapp (the first build takes a few minutes)..."
go build -o bin/caddy ./cmd/caddy
go build -o bin/demoapp ./examples/demoapp
# Caddyfile.example reads its secrets from the environment when the config
# loads, so none stands in Caddy's saved config. Each one not set is given
# a DEMO value, good for this machine only (the defaults of caddy
# service-token and service-webhook).
export CLIENT_SECRET="${CLIENT_SECRET:-demo-client-secret}"
export APP_SECRET="${APP_SECRET:-demo-app-secret}"
export SERVICEGATE_INSTALLATIONS_KEY="${SERVICEGATE_INSTALLATIONS_KEY:-demo-installations-key-32-bytes!}"
bin/demoapp -listen 127.0.0.1:3000 &
app=$!
trap 'kill $app 2>/dev/null || true' EXIT INT TERM
# service_app reads the app's descriptor from the app: wait until it answers.
for _ in $(seq 50); do
	bin/caddy service-app check http://127.0.0.1:3000/manifest.json >/dev/null 2>&1 && break
	sleep 0.2
done
bin/caddy run --config Caddyfile.example --adapter caddyfile
