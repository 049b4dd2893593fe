package perf

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"tally.dev/tally/queues"
)

// tallyUser is the user tally runs as, kueueUser the one minimalkueue
// runs as: the audit log records their requests and no one else's.
const (
	tallyUser = "tally"
	kueueUser = "kueue"
)

// auditPolicy records the metadata of each of the schedulers' requests
// once, when it completes. Every run's API server has it, whichever
// scheduler it runs.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  users: [` + tallyUser + `, ` + kueueUser + `]
- level: None
`

// Requests counts the scheduler's API requests in the measured window.
type Requests struct {
	Total int `json:"total"`
	// Writes are creates, updates, patches and deletes of anything but
	// Events; EventWrites those of Events.
	Writes      int `json:"writes"`
	EventWrites int `json:"eventWrites"`
	// Failed answered with a status of 400 or more (conflicts included).
	Failed int `json:"failed"`
	// ByKind counts "verb resource[/subresource]", e.g. "patch jobs".
	ByKind map[string]int `json:"byKind"`
	// WritesByManager counts the Writes by the fieldManager they name
	// (tally names admissions, preemptions and label writes apart).
	WritesByManager map[string]int `json:"writesByManager"`
	// RefusedByManager counts those of the WritesByManager that the API
	// server refused (a status of 400 or more, a conflict for example).
	RefusedByManager map[string]int `json:"refusedByManager,omitempty"`
	// Admissions counts the admission writes the API server took that
	// admitted a workload: its first, or its first after a preemption
	// write. Readmissions counts the others it took, each an admission of
	// a workload already admitted, with no eviction between. Both are read
	// from the audit log, in the order the API server completed them.
	Admissions   int `json:"admissions,omitempty"`
	Readmissions int `json:"readmissions,omitempty"`
	// FirstAdmitted is when the API server answered the first admission
	// write it took for each Job, by namespace/name.
	FirstAdmitted map[string]time.Time `json:"-"`
}

type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp  time.Time `json:"stageTimestamp"`
	RequestURI      string    `json:"requestURI"`
}

// stateWrite is a write the API server took that admitted a workload
// (admit) or evicted it, and when it completed.
type stateWrite struct {
	at    time.Time
	admit bool
}

// countRequests reads an audit log and counts user's requests received
// within [from, to].
func countRequests(path, user string, from, to time.Time) (Requests, error) {
	f, err := os.Open(path)
	if err != nil {
		return Requests{}, err
	}
	defer f.Close()
	return countRequestsFrom(f, user, from, to)
}

func countRequestsFrom(r io.Reader, user string, from, to time.Time) (Requests, error) {
	out := Requests{ByKind: map[string]int{}, WritesByManager: map[string]int{}, RefusedByManager: map[string]int{}, FirstAdmitted: map[string]time.Time{}}
	// The admission and preemption writes each workload took, by
	// "resource namespace/name".
	states := map[string][]stateWrite{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return out, fmt.Errorf("audit log: %w", err)
		}
		if e.User.Username != user || e.RequestReceived.Before(from) || e.RequestReceived.After(to) {
			continue
		}
		out.Total++
		kind, resource := e.Verb, ""
		if e.ObjectRef != nil {
			resource = e.ObjectRef.Resource
			kind += " " + resource
			if e.ObjectRef.Subresource != "" {
				kind += "/" + e.ObjectRef.Subresource
			}
		}
		out.ByKind[kind]++
		switch e.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			if resource == "events" {
				out.EventWrites++
			} else {
				m := fieldManager(e.RequestURI)
				out.Writes++
				out.WritesByManager[m]++
				if refused(e) {
					out.RefusedByManager[m]++
				} else if (m == queues.FieldManagerAdmission || m == queues.FieldManagerPreemption) && e.ObjectRef != nil && e.ObjectRef.Subresource == "" {
					name := e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
					key := resource + " " + name
					states[key] = append(states[key], stateWrite{at: e.StageTimestamp, admit: m == queues.FieldManagerAdmission})
					if at, ok := out.FirstAdmitted[name]; resource == "jobs" && m == queues.FieldManagerAdmission && (!ok || e.StageTimestamp.Before(at)) {
						out.FirstAdmitted[name] = e.StageTimestamp
					}
				}
			}
		}
		if refused(e) {
			out.Failed++
		}
	}
	for _, ws := range states {
		sort.SliceStable(ws, func(i, j int) bool { return ws[i].at.Before(ws[j].at) })
		admitted := false
		for _, w := range ws {
			switch {
			case !w.admit:
				admitted = false
			case admitted:
				out.Readmissions++
			default:
				out.Admissions++
				admitted = true
			}
		}
	}
	return out, sc.Err()
}

func refused(e auditEvent) bool { return e.ResponseStatus != nil && e.ResponseStatus.Code >= 400 }

// fieldManager returns the fieldManager parameter of a request URI, or "".
func fieldManager(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	return u.Query().Get("fieldManager")
}

// metrics are Prometheus samples by series, "name{label="value",...}".
type metrics map[string]float64

// parseMetrics reads the Prometheus text format.
func parseMetrics(r io.Reader) (metrics, error) {
	m := metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("metrics: bad line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: bad value in %q: %w", line, err)
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// sum adds the samples of metric name whose labels include match.
func (m metrics) sum(name string, match map[string]string) float64 {
	var total float64
	for series, v := range m {
		n, labels := splitSeries(series)
		if n != name {
			continue
		}
		ok := true
		for k, want := range match {
			if labels[k] != want {
				ok = false
				break
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

// byLabel sums metric name's samples per value of label.
func (m metrics) byLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for series, v := range m {
		if n, labels := splitSeries(series); n == name {
			out[labels[label]] += v
		}
	}
	return out
}

// quantile estimates the q-quantile (0 < q <= 1) of histogram name from
// its buckets, interpolating within the bucket that holds it, as
// Prometheus's histogram_quantile does. It returns 0 when the histogram
// is empty, and the largest finite bound when the quantile lies beyond it.
func (m metrics) quantile(name string, q float64) float64 {
	type bucket struct{ le, n float64 }
	var bs []bucket
	for series, v := range m {
		n, labels := splitSeries(series)
		if n != name+"_bucket" {
			continue
		}
		le, err := strconv.ParseFloat(labels["le"], 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{le, v})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) == 0 || bs[len(bs)-1].n <= 0 {
		return 0
	}
	rank := q * bs[len(bs)-1].n
	lower, below := 0.0, 0.0
	for _, b := range bs {
		if b.n >= rank {
			if math.IsInf(b.le, 1) {
				return lower
			}
			if b.n == below {
				return b.le
			}
			return lower + (b.le-lower)*(rank-below)/(b.n-below)
		}
		lower, below = b.le, b.n
	}
	return lower
}

// byLabels sums metric name's samples per value of the labels, joined
// by spaces (an empty value left out), such as "POST jobs" or "PATCH
// jobs status" for verb, resource and subresource.
func (m metrics) byLabels(name string, labels ...string) map[string]float64 {
	out := map[string]float64{}
	for series, v := range m {
		n, ls := splitSeries(series)
		if n != name {
			continue
		}
		var key []string
		for _, l := range labels {
			if ls[l] != "" {
				key = append(key, ls[l])
			}
		}
		out[strings.Join(key, " ")] += v
	}
	return out
}

// minus returns m - before, series by series.
func (m metrics) minus(before metrics) metrics {
	out := make(metrics, len(m))
	for k, v := range m {
		out[k] = v - before[k]
	}
	return out
}

func splitSeries(series string) (string, map[string]string) {
	name, rest, ok := strings.Cut(series, "{")
	labels := map[string]string{}
	if !ok {
		return name, labels
	}
	rest = strings.TrimSuffix(rest, "}")
	for rest != "" {
		k, after, ok := strings.Cut(rest, "=")
		if !ok || !strings.HasPrefix(after, `"`) {
			break
		}
		var val strings.Builder
		i := 1
		for ; i < len(after); i++ {
			c := after[i]
			if c == '\\' && i+1 < len(after) {
				i++
				switch after[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(after[i])
				}
				continue
			}
			if c == '"' {
				break
			}
			val.WriteByte(c)
		}
		labels[strings.TrimSpace(k)] = val.String()
		rest = strings.TrimPrefix(after[min(i+1, len(after)):], ",")
	}
	return name, labels
}

// sortedKinds lists ByKind as "kind=count", most frequent first.
func (r Requests) sortedKinds() []string {
	kinds := make([]string, 0, len(r.ByKind))
	for k := range r.ByKind {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if r.ByKind[kinds[i]] != r.ByKind[kinds[j]] {
			return r.ByKind[kinds[i]] > r.ByKind[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = fmt.Sprintf("%s=%d", k, r.ByKind[k])
	}
	return out
}
