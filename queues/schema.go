package queues

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/flavors"
)

// The kinds of config documents.
const (
	kindResourceFlavor        = "ResourceFlavor"
	kindClusterQueue          = "ClusterQueue"
	kindLocalQueue            = "LocalQueue"
	kindWorkloadPriorityClass = "WorkloadPriorityClass"
	kindCohort                = "Cohort"
	kindTopology              = "Topology"
)

// topologyAlphaVersion is the apiVersion Kueue's Topology had before
// v1beta1, accepted for Topology documents only.
const topologyAlphaVersion = "kueue.x-k8s.io/v1alpha1"

func supportedAPIVersions() []string {
	return []string{"tally.dev/v1", "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"}
}

func supportedKinds() []string {
	return []string{kindResourceFlavor, kindTopology, kindClusterQueue, kindCohort, kindLocalQueue, kindWorkloadPriorityClass, kindWorkloadKind}
}

// header is what every document must have, read before the kind is known.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// The raw documents, with Kueue's field names.

// Each raw kind spells out apiVersion, kind and metadata rather than
// embedding a common struct, whose Go name would show in decoding errors.

type rawResourceFlavor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       rawFlavorSpec     `json:"spec"`
}

type rawFlavorSpec struct {
	NodeLabels map[string]string `json:"nodeLabels"`
	// NodeSelector is an alias of NodeLabels.
	NodeSelector map[string]string   `json:"nodeSelector"`
	NodeTaints   []corev1.Taint      `json:"nodeTaints"`
	Tolerations  []corev1.Toleration `json:"tolerations"`
	TopologyName string              `json:"topologyName"`
}

// rawTopology is Kueue's Topology (v1alpha1, v1beta1 and v1beta2 alike):
// the node labels of its levels, coarsest first.
type rawTopology struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Levels []rawTopologyLevel `json:"levels"`
	} `json:"spec"`
}

type rawTopologyLevel struct {
	NodeLabel string `json:"nodeLabel"`
}

type rawClusterQueue struct {
	APIVersion string              `json:"apiVersion"`
	Kind       string              `json:"kind"`
	Metadata   metav1.ObjectMeta   `json:"metadata"`
	Spec       rawClusterQueueSpec `json:"spec"`
}

type rawClusterQueueSpec struct {
	ResourceGroups []rawResourceGroup `json:"resourceGroups"`
	// Cohort is v1beta1's name, CohortName v1beta2's.
	Cohort            string                `json:"cohort"`
	CohortName        string                `json:"cohortName"`
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
	QueueingStrategy  string                `json:"queueingStrategy"`
	Preemption        *rawPreemption        `json:"preemption"`
	FlavorFungibility *rawFungibility       `json:"flavorFungibility"`
	FairSharing       *rawFairSharing       `json:"fairSharing"`
	StopPolicy        string                `json:"stopPolicy"`
}

// rawCohort is Kueue's Cohort (v1beta1 and v1beta2 alike): a node of a
// tree of cohorts, with quota of its own.
type rawCohort struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       rawCohortSpec     `json:"spec"`
}

type rawCohortSpec struct {
	ParentName     string             `json:"parentName"`
	ResourceGroups []rawResourceGroup `json:"resourceGroups"`
	FairSharing    *rawFairSharing    `json:"fairSharing"`
}

type rawResourceGroup struct {
	CoveredResources []corev1.ResourceName `json:"coveredResources"`
	Flavors          []rawFlavorQuotas     `json:"flavors"`
}

type rawFlavorQuotas struct {
	Name      string             `json:"name"`
	Resources []rawResourceQuota `json:"resources"`
}

// rawResourceQuota keeps the quantities as written, so that a bad one is
// reported with its path.
type rawResourceQuota struct {
	Name           corev1.ResourceName `json:"name"`
	NominalQuota   json.RawMessage     `json:"nominalQuota"`
	BorrowingLimit json.RawMessage     `json:"borrowingLimit"`
	LendingLimit   json.RawMessage     `json:"lendingLimit"`
}

type rawPreemption struct {
	WithinClusterQueue  string                 `json:"withinClusterQueue"`
	ReclaimWithinCohort string                 `json:"reclaimWithinCohort"`
	BorrowWithinCohort  *rawBorrowWithinCohort `json:"borrowWithinCohort"`
}

type rawBorrowWithinCohort struct {
	Policy               string          `json:"policy"`
	MaxPriorityThreshold json.RawMessage `json:"maxPriorityThreshold"`
}

type rawFungibility struct {
	WhenCanBorrow  string `json:"whenCanBorrow"`
	WhenCanPreempt string `json:"whenCanPreempt"`
}

type rawFairSharing struct {
	Weight json.RawMessage `json:"weight"`
}

type rawLocalQueue struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		ClusterQueue string `json:"clusterQueue"`
		StopPolicy   string `json:"stopPolicy"`
	} `json:"spec"`
}

// rawPriorityClass is a WorkloadPriorityClass: value and description are
// at the top level, not under spec.
type rawPriorityClass struct {
	APIVersion  string            `json:"apiVersion"`
	Kind        string            `json:"kind"`
	Metadata    metav1.ObjectMeta `json:"metadata"`
	Value       json.RawMessage   `json:"value"`
	Description string            `json:"description"`
}

// isUnset says whether a raw value was left out or written as null.
func isUnset(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) == 0 || string(s) == "null"
}

// rawText is a raw scalar as the user wrote it: a string unquoted.
func rawText(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

// Bounds on a quantity's text and decimal exponent. Arithmetic on a
// quantity such as 1e999999999 scales a big decimal and never ends.
const (
	maxQuantityLen      = flavors.MaxQuantityText
	maxQuantityExponent = flavors.MaxQuantityExponent
)

// errQuantityRange reports a quantity beyond maxQuantityExponent.
var errQuantityRange = errors.New("quantity out of range")

// parseQuantity parses a quantity written as a YAML number or string. Its
// text is checked first: resource.ParseQuantity itself can take minutes
// over an exponent such as 1e-999999999.
func parseQuantity(raw json.RawMessage) (resource.Quantity, error) {
	text := rawText(raw)
	if len(text) > maxQuantityLen {
		return resource.Quantity{}, resource.ErrFormatWrong
	}
	if err := flavors.CheckQuantityText(text); err != nil {
		return resource.Quantity{}, fmt.Errorf("%w: %w", errQuantityRange, err)
	}
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return resource.Quantity{}, err
	}
	probe := q
	if scale := probe.AsDec().Scale(); scale > maxQuantityExponent || scale < -maxQuantityExponent {
		return resource.Quantity{}, errQuantityRange
	}
	return q, nil
}

// parseInt32 parses a raw JSON integer in the int32 range.
func parseInt32(raw json.RawMessage) (int32, error) {
	v, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 32)
	return int32(v), err
}

// coveredResources is a group's coveredResources or, when it is left out,
// the resources its flavors list, in the order they first appear.
func coveredResources(g *rawResourceGroup) []corev1.ResourceName {
	if len(g.CoveredResources) > 0 {
		return g.CoveredResources
	}
	var out []corev1.ResourceName
	seen := map[corev1.ResourceName]bool{}
	for _, f := range g.Flavors {
		for _, r := range f.Resources {
			if !seen[r.Name] {
				seen[r.Name] = true
				out = append(out, r.Name)
			}
		}
	}
	return out
}

// cohortOf is the cohort, whichever of its names is set.
func cohortOf(s *rawClusterQueueSpec) string {
	if s.Cohort != "" {
		return s.Cohort
	}
	return s.CohortName
}
