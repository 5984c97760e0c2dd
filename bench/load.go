package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// drain reads and closes the answer, and refuses anything but a 2xx.
func drain(resp *http.Response) error {
	defer resp.Body.Close()
	_, err := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	return nil
}

// concurrentJobs has workers clients send rq to base over and over until
// d has passed or each has sent perWorker jobs, and returns how many
// completed. The first failure stops them all.
func concurrentJobs(rq request, base string, workers int, d time.Duration, perWorker int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute)
	defer cancel()
	deadline := time.Now().Add(d)
	tr := &http.Transport{MaxIdleConnsPerHost: workers, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Minute}

	var (
		mu       sync.Mutex
		done     int
		firstErr error
		wg       sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < perWorker && time.Now().Before(deadline); n++ {
				req, err := rq.build(base)
				if err == nil {
					var resp *http.Response
					resp, err = client.Do(req.WithContext(ctx))
					if err == nil {
						err = drain(resp)
					}
				}
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
					return
				}
				done++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return done, firstErr
}
