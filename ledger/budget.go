package ledger

import (
	"context"

	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// writeBudget is the client-side rate limit of the ledger's writes: one
// token bucket of the config's QPS and burst, shared by every write the
// ledger makes (admissions, preemptions and labels, of every kind). Its
// free tokens bound what a pass decides (see decide): a write decided
// beyond them would wait its turn in the bucket with its quota assumed.
type writeBudget struct{ lim *rate.Limiter }

func newWriteBudget(qps float32, burst int) *writeBudget {
	return &writeBudget{lim: rate.NewLimiter(rate.Limit(qps), burst)}
}

// Free is how many requests may be sent at once now, and how many a
// second (Options.Budget).
func (b *writeBudget) Free() (tokens, qps float64) {
	return b.lim.Tokens(), float64(b.lim.Limit())
}

// The flowcontrol.RateLimiter that rest.Config.RateLimiter takes.
func (b *writeBudget) TryAccept() bool                { return b.lim.Allow() }
func (b *writeBudget) Accept()                        { _ = b.lim.Wait(context.Background()) }
func (b *writeBudget) Stop()                          {}
func (b *writeBudget) QPS() float32                   { return float32(b.lim.Limit()) }
func (b *writeBudget) Wait(ctx context.Context) error { return b.lim.Wait(ctx) }

// writeClient is mgr's client with the ledger's own writeBudget, whose
// patches of workloads read back only their resourceVersion
// (versionPatches). Reads come from the cache as with mgr's client, and
// the writes share the one bucket, apart from the Events, the webhook
// and leader election. The bucket follows client-go's reading of the
// config: QPS and burst 0 are its defaults, and a negative QPS means no
// limit (and no budget: free is nil).
func writeClient(mgr manager.Manager) (cl client.Client, free func() (tokens, qps float64), err error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	if cfg.RateLimiter == nil && cfg.QPS >= 0 {
		qps, burst := cfg.QPS, cfg.Burst
		if qps == 0 {
			qps = rest.DefaultQPS
		}
		if burst == 0 {
			burst = rest.DefaultBurst
		}
		b := newWriteBudget(qps, burst)
		cfg.RateLimiter, free = b, b.Free
	}
	cl, err = client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		Cache: &client.CacheOptions{Reader: mgr.GetCache()}})
	if err != nil {
		return nil, nil, err
	}
	cl, err = newVersionPatches(cl, cfg, mgr.GetHTTPClient(), mgr.GetRESTMapper())
	return cl, free, err
}
