package main

import (
	"net/http"
	"testing"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// TestUnindexedHeaders: the *http.Transport that client-go makes for a
// config, under the wrappers of its transport cache and its own, is set
// to send headers unindexed, and a WrapTransport set before still wraps.
func TestUnindexedHeaders(t *testing.T) {
	wrapped := 0
	cfg := &rest.Config{Host: "https://127.0.0.1:1", UserAgent: "tally/test", TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { wrapped++; return rt }}
	unindexedHeaders(cfg)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inner := hc.Transport
	for {
		w, ok := inner.(utilnet.RoundTripperWrapper)
		if !ok {
			break
		}
		inner = w.WrappedRoundTripper()
	}
	tr, ok := inner.(*http.Transport)
	if !ok {
		t.Fatalf("no *http.Transport under %T, but %T", hc.Transport, inner)
	}
	if tr.HTTP2 == nil || tr.HTTP2.MaxEncoderHeaderTableSize != 1 {
		t.Errorf("the transport's HTTP/2 config is %+v, want MaxEncoderHeaderTableSize 1", tr.HTTP2)
	}
	if wrapped != 1 {
		t.Errorf("the WrapTransport set before ran %d times, want once", wrapped)
	}
}
