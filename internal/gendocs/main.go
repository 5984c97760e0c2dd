// Command gendocs writes docs/reference/cli.md, the reference of
// servicegate's CLI subcommands, from the commands Caddy's registry holds
// (caddycmd.Commands): their usage, help text and flag definitions. Run it
// from the repository's root after changing a command:
//
//	go run ./internal/gendocs
//
// Its test fails when the page differs from what it would write.
package main

import (
	"fmt"
	"os"

	_ "github.com/servicegate/servicegate"
)

// page is where the reference is written, from the repository's root.
const page = "docs/reference/cli.md"

func main() {
	if err := os.WriteFile(page, CLIReference(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}
