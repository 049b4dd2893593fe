// Package certs owns the TLS material of tally's admission webhooks: a
// self-signed CA and a serving certificate it signs, where they are kept
// (a directory the webhook server reads, and optionally a
// kubernetes.io/tls Secret shared by all replicas), their rotation before
// they expire, and the injection of the CA bundle into the webhook
// configurations.
//
// The pieces:
//   - Generate, NeedsRenewal: pure functions of the hosts and a time.
//   - WriteDir, LoadDir, EnsureDir: the directory store. Files are
//     replaced atomically (temp file, then rename), so controller-runtime's
//     certwatcher never reads a half-written file.
//   - EnsureSecret: the Secret store, safe against several replicas racing
//     (create-or-reread, updates guarded by resourceVersion).
//   - InjectCABundle: writes the CA into every webhook of the named
//     configurations.
//   - Rotator: a manager.Runnable that runs one round of the above every
//     Interval on every replica.
//
// Renewal keeps the CA and issues a new serving certificate while the CA
// stays valid for long enough, so the injected bundle does not change. When
// the CA itself must be replaced, the new bundle still trusts the previous
// CA until it expires, so replicas that have not reloaded yet keep working.
//
// The clients handed to this package should read from the API server, not
// from a cache: the decisions here depend on reading back what another
// replica has just written.
//
// This package may import only the standard library, k8s.io/* and
// controller-runtime; no other tally package.
package certs
