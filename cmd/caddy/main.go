// Command caddy is the Caddy web server with Caddy's standard modules and
// servicegate's modules built in.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/servicegate/servicegate"
)

func main() {
	caddycmd.Main()
}
