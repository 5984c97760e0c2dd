package caddymodule

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/queue"
)

// When and where a webhook queue opens: a queue in Redis at once, a file
// when the config starts (see StoresStart).

// openDiskQueue returns what opens the handler's queue in its file: in
// the queue's dir, else the default file in Caddy's data directory.
func (m *ServiceWebhook) openDiskQueue(_ *Servicegate, sender *queue.HTTPSender, opts queue.Options, _ *zap.Logger) func() (caddy.Destructor, error) {
	m.queueKey = defaultDiskQueue()
	dir := filepath.Dir(m.queueKey)
	if d := caddy.NewReplacer().ReplaceKnown(m.Queue.Dir, ""); d != "" {
		dir, m.queueKey = d, filepath.Join(d, "queue.db")
	}
	m.queueAt = dir
	return func() (caddy.Destructor, error) {
		store, err := queue.OpenBolt(m.queueKey)
		if err != nil {
			return nil, err
		}
		q, err := queue.Open(store, sender, opts)
		if err != nil {
			store.Close()
			return nil, err
		}
		return pooledQueue{Deliveries: q, where: dir}, nil
	}
}

// startQueue opens the handler's queue with open, or joins it if a config
// has it open: a queue in Redis at once, a file when the config starts (or
// at the first delivery before that), never in Provision, since `caddy
// validate` beside a running Caddy would wait on the lock it holds on it.
func (m *ServiceWebhook) startQueue(ctx caddy.Context, shared bool, open func() (caddy.Destructor, error)) error {
	openPooled := func() error {
		v, _, err := webhookQueues.LoadOrNew(m.queueKey, open)
		if err != nil {
			return fmt.Errorf("service_webhook: queue: %w", err)
		}
		m.queue, m.queueAt = v.(pooledQueue).Deliveries, v.(pooledQueue).where
		return nil
	}
	if shared {
		// Redis holds no lock a validation could wait on.
		m.openQueue = func() error { return nil }
		return openPooled()
	}
	starts, err := storesStart(ctx)
	if err != nil {
		return fmt.Errorf("service_webhook: queue: %w", err)
	}
	m.openQueue, err = starts.opening(openPooled)
	return err
}

// queueStats is the state of the handler's queue, nothing while it is not
// open.
func (m *ServiceWebhook) queueStats() queue.Stats {
	if m.openQueue() != nil || m.queue == nil {
		return queue.Stats{}
	}
	return m.queue.Stats()
}

// queueStore says where qc keeps its deliveries, "disk" or "redis" (shared:
// the servicegate app has Redis), and names the default disk queue's file
// when that choice leaves it behind: a queue that defaults to Redis while
// the file of an earlier disk queue exists.
func queueStore(qc *WebhookQueue, shared bool) (store, left string) {
	store = qc.Store // Validate has checked it
	if store != "" {
		return store, ""
	}
	// An explicit dir asks for the disk.
	if !shared || qc.Dir != "" {
		return "disk", ""
	}
	if f := defaultDiskQueue(); fileExists(f) {
		left = f
	}
	return "redis", left
}

// defaultDiskQueue is the file of the disk queue when no dir is named.
func defaultDiskQueue() string {
	return filepath.Join(caddy.AppDataDir(), "servicegate", "webhook-queue", "queue.db")
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
