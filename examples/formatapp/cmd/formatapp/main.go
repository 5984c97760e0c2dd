// Command formatapp runs the "key = value" custom-file-format demo app:
// put servicegate's service_limits with contract custom-file-format in
// front of /file-format, and contract file-pre-export in front of
// /pre-export.
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/servicegate/servicegate/examples/formatapp"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:3001", "address to listen on")
	flag.Parse()
	log.Printf("format app listening on http://%s", *addr)
	srv := &http.Server{Addr: *addr, Handler: formatapp.Handler(), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
