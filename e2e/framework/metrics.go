package framework

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Metrics are the samples of a Prometheus text exposition, by series:
// `name{k="v",...}`, labels sorted (a series without labels is `name{}`).
type Metrics map[string]float64

// ScrapeMetrics reads tally's /metrics on port (Tally.MetricsPort).
func ScrapeMetrics(ctx context.Context, port int) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// ParseMetrics reads a Prometheus text exposition.
func ParseMetrics(r io.Reader) (Metrics, error) {
	m := Metrics{}
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
		name, labels, err := splitSeries(line[:i])
		if err != nil {
			return nil, fmt.Errorf("metrics: %w in %q", err, line)
		}
		m[Series(name, labels)] = v
	}
	return m, sc.Err()
}

// Series names the series of metric name with labels.
func Series(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, labels[k])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// Value is the sample of metric name whose labels are exactly labels (k,
// v pairs), and whether there is one.
func (m Metrics) Value(name string, labels ...string) (float64, bool) {
	l := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	v, ok := m[Series(name, l)]
	return v, ok
}

// Sum adds up the samples of metric name that have labels (k, v pairs)
// among theirs, and says how many there are.
func (m Metrics) Sum(name string, labels ...string) (float64, int) {
	sum, n := 0.0, 0
	for series, v := range m {
		sn, have, err := splitSeries(series)
		if err != nil || sn != name {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if got, ok := have[labels[i]]; !ok || got != labels[i+1] {
				match = false
			}
		}
		if match {
			sum += v
			n++
		}
	}
	return sum, n
}

// splitSeries parses `name{k="v",...}`.
func splitSeries(s string) (string, map[string]string, error) {
	name, rest, ok := strings.Cut(s, "{")
	labels := map[string]string{}
	if !ok {
		return s, labels, nil
	}
	rest = strings.TrimSuffix(rest, "}")
	for rest != "" {
		k, after, ok := strings.Cut(rest, "=")
		if !ok || !strings.HasPrefix(after, `"`) {
			return "", nil, fmt.Errorf("bad labels")
		}
		var val strings.Builder
		i := 1
		for ; i < len(after) && after[i] != '"'; i++ {
			if after[i] == '\\' && i+1 < len(after) {
				i++
				switch after[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(after[i])
				}
				continue
			}
			val.WriteByte(after[i])
		}
		if i >= len(after) {
			return "", nil, fmt.Errorf("unterminated label value")
		}
		labels[strings.TrimSpace(k)] = val.String()
		rest = strings.TrimPrefix(after[i+1:], ",")
	}
	return name, labels, nil
}
