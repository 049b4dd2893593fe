package webhook

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

func TestLimit(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write(body)
	})
	t.Run("a body within the limit passes", func(t *testing.T) {
		w := httptest.NewRecorder()
		limit(echo, 10, time.Minute).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("0123456789")))
		if w.Code != http.StatusOK || w.Body.String() != "0123456789" {
			t.Fatalf("%d %q, want 200 and the body", w.Code, w.Body)
		}
	})
	t.Run("a body declared larger is refused unread", func(t *testing.T) {
		read := false
		h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { read = true })
		w := httptest.NewRecorder()
		limit(h, 10, time.Minute).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("0123456789a")))
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil || review.Response == nil || review.Response.Result == nil {
			t.Fatalf("not an AdmissionReview with a result (%v): %s", err, w.Body)
		}
		got := review.Response.Result
		if read || review.APIVersion != "admission.k8s.io/v1" || review.Response.Allowed || got.Code != http.StatusRequestEntityTooLarge ||
			got.Message != "tally: the request body is larger than the 10-byte limit" {
			t.Fatalf("read=%v %s allowed=%v %d %q", read, review.APIVersion, review.Response.Allowed, got.Code, got.Message)
		}
	})
	t.Run("a body of unknown length cut off at the limit", func(t *testing.T) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader("0123456789a")))
		r.ContentLength = -1
		limit(echo, 10, time.Minute).ServeHTTP(w, r)
		if want := "tally: the request body is larger than the 10-byte limit\n"; w.Code != http.StatusBadRequest || w.Body.String() != want {
			t.Fatalf("%d %q, want 400 %q", w.Code, w.Body, want)
		}
	})
	t.Run("the admission webhook answers a body cut off with a 400", func(t *testing.T) {
		body := hostileReq{op: "CREATE", ns: "team", name: "j", user: alice, obj: rawJob("", "", "", `{"cpu":"1"}`)}.body()
		r := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader(body)))
		r.ContentLength = -1
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		limit(testWebhook(newMutator(t, testConfig(t))), 100, time.Minute).ServeHTTP(w, r)
		checkAnswer(t, w.Body.Bytes(), "", "", badRequest("tally: the request body is larger than the 100-byte limit"))
	})
	t.Run("a request not answered in time gets a 503", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		stuck := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release })
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
		ctx, cancel := context.WithTimeout(context.Background(), hostileDeadline)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			limit(stuck, 10, 20*time.Millisecond).ServeHTTP(w, r)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("the timeout did not answer")
		}
		if want := "tally: the webhook did not answer within 20ms"; w.Code != http.StatusServiceUnavailable || w.Body.String() != want {
			t.Fatalf("%d %q, want 503 %q", w.Code, w.Body, want)
		}
	})
	t.Run("the handler's context ends at the timeout", func(t *testing.T) {
		ended := make(chan error, 1)
		h := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			ended <- r.Context().Err()
		})
		w := httptest.NewRecorder()
		limit(h, 10, 20*time.Millisecond).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}")))
		if err := <-ended; err != context.DeadlineExceeded || w.Code != http.StatusServiceUnavailable {
			t.Fatalf("context ended with %v, answer %d; want %v and 503", err, w.Code, context.DeadlineExceeded)
		}
	})
}

// TestRequestBounds checks the bounds against what they bound: no
// webhook configuration waits less than RequestTimeout, and a body over
// controller-runtime's 7 MiB cap is refused by Limit first.
func TestRequestBounds(t *testing.T) {
	m, v := Configurations(nil, Endpoint{URL: "https://127.0.0.1:9443"}, "tally-system")
	var timeouts []int32
	for _, w := range m.Webhooks {
		timeouts = append(timeouts, *w.TimeoutSeconds)
	}
	for _, w := range v.Webhooks {
		timeouts = append(timeouts, *w.TimeoutSeconds)
	}
	if len(timeouts) != 9 {
		t.Fatalf("%d webhooks, want 9", len(timeouts))
	}
	for _, s := range timeouts {
		if RequestTimeout > time.Duration(s)*time.Second {
			t.Errorf("RequestTimeout %s is longer than a webhook's timeoutSeconds %d", RequestTimeout, s)
		}
	}
	if MaxRequestBytes > 7<<20 || MaxRequestBytes < 2*maxGuardedObject {
		t.Errorf("MaxRequestBytes %d is not at most controller-runtime's 7 MiB and at least twice maxGuardedObject", MaxRequestBytes)
	}
}
