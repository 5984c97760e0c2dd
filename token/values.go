package token

import "sync/atomic"

// valuesPerChunk is how many header values one chunk of a valueChunks
// holds: with three claim headers, one chunk serves 85 requests.
const valuesPerChunk = 256

// valueChunks hands out the backing arrays of the claim headers' values,
// n at a time, carved from larger chunks, so a request costs one
// allocation per many requests rather than one of its own, as net/http
// does for the header values of one request.
//
// Every value handed out belongs to one request for good: it is never
// handed out again, because a later handler may change a request's
// header values in place (Caddy's headers handler does) and may keep
// them past the request. A chunk is garbage once no request holds any of
// its values.
type valueChunks struct {
	cur atomic.Pointer[valueChunk]
}

type valueChunk struct {
	vals []string
	next atomic.Int64 // index of the first value not handed out
}

// take returns n fresh, zeroed values.
func (c *valueChunks) take(n int) []string {
	if n > valuesPerChunk/4 {
		return make([]string, n)
	}
	for {
		ch := c.cur.Load()
		if ch != nil {
			end := ch.next.Add(int64(n))
			if end <= int64(len(ch.vals)) {
				return ch.vals[end-int64(n) : end : end]
			}
		}
		// Spent (or none yet): put a new chunk in place of ch, unless
		// another caller did first; the values ch has left are dropped.
		fresh := &valueChunk{vals: make([]string, valuesPerChunk)}
		fresh.next.Store(int64(n))
		if c.cur.CompareAndSwap(ch, fresh) {
			return fresh.vals[:n:n]
		}
	}
}
