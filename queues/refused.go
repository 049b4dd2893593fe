package queues

import (
	"regexp"
	"strings"
)

// Kueue's fields and documents that tally does not run. A config that
// has one is refused, with a field-path error that says so and what to
// do instead: tally would otherwise admit a workload that Kueue holds
// (for an admission check, say) or place it where Kueue would not, and
// the admin who pasted the manifest would never know. docs/kueue-fields.md
// lists every field of Kueue's kinds and what tally does with it;
// TestKueueFieldsParsedOrRefused keeps the two in step.
//
// Fields tally ignores on purpose, because they do nothing in tally, are
// read without a word (ignoredFields); any other unknown field is a
// warning, as a typo must not make a config invalid.

// refusedFields maps a document kind to its refused fields, each a
// dotted path from the top of the document, to why and what to do.
var refusedFields = map[string]map[string]string{
	kindClusterQueue: {
		"spec.admissionChecks":              refusedChecks,
		"spec.admissionChecksStrategy":      refusedChecks,
		"spec.admissionScope":               "tally does not run admission fair sharing; remove the field (tally orders a queue's workloads by priority, then creation time)",
		"spec.concurrentAdmissionPolicy":    "tally does not run concurrent admission (flavor migration); remove the field (an admitted workload keeps its flavor)",
		"spec.flavorFungibility.preference": "tally does not run flavor preference; remove the field (tally chooses between borrowing and preempting by whenCanBorrow and whenCanPreempt)",
	},
	kindLocalQueue: {
		"spec.fairSharing": "tally does not run admission fair sharing; remove the field (fair sharing in tally is a ClusterQueue's fairSharing, between the queues of a cohort)",
	},
}

// refusedChecks is why a ClusterQueue's admission checks are refused.
const refusedChecks = "tally does not run admission checks; remove the field (tally admits as soon as quota allows)"

// refusedKinds maps Kueue's kinds that tally does not run to why and what
// to do.
var refusedKinds = map[string]string{
	"AdmissionCheck":            "tally does not run admission checks or ProvisioningRequests; remove the document",
	"ProvisioningRequestConfig": "tally does not run admission checks or ProvisioningRequests; remove the document",
	"MultiKueueConfig":          "tally does not dispatch workloads to other clusters (MultiKueue); remove the document",
	"MultiKueueCluster":         "tally does not dispatch workloads to other clusters (MultiKueue); remove the document",
	"Workload":                  "tally keeps a workload's state on the job object itself, not in Workload objects; remove the document",
}

// ignoredFields are the top-level fields tally reads without using: they
// have no effect in tally. metadata is read whole (labels, annotations,
// uid and the rest are ignored); status is what Kueue reports, not
// configuration.
var ignoredFields = map[string]bool{"status": true}

// pathIndex matches a list index in a decoder's field path.
var pathIndex = regexp.MustCompile(`\[[^\]]*\]`)

// refusedField says why field path (as the decoder reports it, with
// list indexes) of a document of kind is refused; "" when it is not.
func refusedField(kind, path string) string {
	return refusedFields[kind][pathIndex.ReplaceAllString(path, "")]
}

// ignoredField says whether field path of a document is ignored on
// purpose.
func ignoredField(path string) bool {
	top, _, _ := strings.Cut(path, ".")
	return ignoredFields[pathIndex.ReplaceAllString(top, "")]
}

// refusedKind says why a document of kind is refused; "" when it is not.
func refusedKind(kind string) string { return refusedKinds[kind] }
