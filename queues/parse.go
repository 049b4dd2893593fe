package queues

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"tally.dev/tally/flavors"
)

// Limits that keep a hostile config from exhausting the parser.
const (
	// MaxConfigBytes is the largest config accepted: 1 MiB, what a
	// ConfigMap can hold.
	MaxConfigBytes = 1 << 20
	// MaxDocuments is the most YAML documents read from one config.
	MaxDocuments = 10000
)

// The defaults of optional ClusterQueue fields, as in Kueue.
const (
	defaultStopPolicy     = "None"
	defaultWhenCanBorrow  = "Borrow"
	defaultWhenCanPreempt = "TryNextFlavor"
	// mayStopSearch is Kueue v1beta2's name for Borrow and Preempt.
	mayStopSearch = "MayStopSearch"
	// defaultFairWeight is fairSharing.weight 1, in thousandths.
	defaultFairWeight = 1000
)

// Parse reads a config: multi-document YAML holding ResourceFlavor,
// Topology, ClusterQueue, Cohort, LocalQueue and WorkloadPriorityClass
// documents with Kueue's field names, tally's WorkloadKind documents, and
// at most one of Kueue's Configuration documents, of which it reads
// waitForPodsReady. It returns
// the validated Config, or nil and every error found, each with its field
// path. Warnings, such as unknown fields, never make a config invalid.
//
// Documents are numbered from 0 in the order they are split at "---"
// lines: document[0] is the text before the first separator, which may be
// empty. Parse never panics.
func Parse(data []byte) (*Config, []string, field.ErrorList) {
	p := &parser{}
	return p.run(func() { p.add("", field.NewPath("config"), data) })
}

// ParseFiles reads config files as one config, in order. When there is
// more than one file, each error and warning starts with its file's name.
func ParseFiles(paths ...string) (*Config, []string, field.ErrorList) {
	p := &parser{}
	return p.run(func() {
		for _, path := range paths {
			prefix := ""
			if len(paths) > 1 {
				prefix = path + ": "
			}
			data, err := readLimited(path, MaxConfigBytes-p.size)
			if err != nil {
				p.errs = append(p.errs, withDetail(field.Invalid(field.NewPath(path), path, ""), "%v", err))
				continue
			}
			if p.add(prefix, field.NewPath(path), data); p.size > MaxConfigBytes {
				return
			}
		}
	})
}

// readLimited reads at most limit+1 bytes of a file, enough to tell that
// it is too large without reading all of it.
func readLimited(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(limit)+1))
}

// parser collects the documents of one config and what is wrong with them.
type parser struct {
	docs     []*document
	warnings []string
	errs     field.ErrorList
	// size and count are the bytes and documents read so far.
	size, count int
}

// document is one decoded config document.
type document struct {
	// root is the path every error of the document starts with:
	// `ClusterQueue "a"`, or `document[3]` while the name is unknown.
	root *field.Path
	// where locates the document for messages: "document[3]", with the
	// file name for ParseFiles.
	where string
	kind  string
	// key is the name, or namespace/name for a LocalQueue.
	key string
	// broken is set when the body did not decode. Its name still counts
	// as defined, so that one mistake does not cascade into others.
	broken bool

	flavor *rawResourceFlavor
	cq     *rawClusterQueue
	co     *rawCohort
	lq     *rawLocalQueue
	wpc    *rawPriorityClass
	topo   *rawTopology
	wk     *rawWorkloadKind
	conf   *rawConfiguration
}

// run runs read, validates what it read and builds the Config. A panic,
// which would be a bug, becomes an internal error rather than crashing
// the webhook or the ledger.
func (p *parser) run(read func()) (cfg *Config, warnings []string, errs field.ErrorList) {
	defer func() {
		if r := recover(); r != nil {
			cfg, warnings = nil, p.warnings
			errs = append(p.errs, field.InternalError(field.NewPath("config"), fmt.Errorf("parser failure: %v", r)))
		}
	}()
	read()
	p.errs = append(p.errs, validateDocuments(p.docs)...)
	if len(p.errs) > maxErrors {
		p.errs = append(p.errs[:maxErrors:maxErrors], withDetail(field.TooMany(field.NewPath("config"), len(p.errs), maxErrors),
			"%d more errors not listed", len(p.errs)-maxErrors))
	}
	if len(p.warnings) > maxErrors {
		p.warnings = append(p.warnings[:maxErrors:maxErrors], fmt.Sprintf("config: %d more warnings not listed", len(p.warnings)-maxErrors))
	}
	if len(p.errs) > 0 {
		return nil, p.warnings, p.errs
	}
	return p.build(), p.warnings, nil
}

// add reads the documents of one input. prefix starts every path; sizePath
// is where a size error is reported.
func (p *parser) add(prefix string, sizePath *field.Path, data []byte) {
	p.size += len(data)
	if p.size > MaxConfigBytes {
		p.errs = append(p.errs, withDetail(field.TooLong(sizePath, nil, MaxConfigBytes),
			"is larger than the 1 MiB limit (%d bytes)", MaxConfigBytes))
		return
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	for i, c := range splitDocuments(data, MaxDocuments-p.count) {
		if p.count == MaxDocuments {
			p.errs = append(p.errs, withDetail(field.TooMany(field.NewPath(fmt.Sprintf("%sdocument[%d]", prefix, i)), p.count+1, MaxDocuments),
				"more than %d documents", MaxDocuments))
			return
		}
		p.count++
		p.decode(prefix, i, c)
	}
}

// decode reads document i of an input into p.docs.
func (p *parser) decode(prefix string, i int, c chunk) {
	where := fmt.Sprintf("document[%d]", i)
	if prefix != "" {
		where = fmt.Sprintf("%s document[%d]", strings.TrimSuffix(prefix, ": "), i)
	}
	root := field.NewPath(fmt.Sprintf("%sdocument[%d]", prefix, i))
	js, err := yaml.YAMLToJSONStrict(c.text)
	if err != nil {
		p.errs = append(p.errs, withDetail(field.Invalid(root, nil, ""), "%s", yamlError(err, c.line)))
		return
	}
	if string(js) == "null" {
		return
	}
	var h header
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &h); err != nil {
		p.errs = append(p.errs, decodeError(root, err, "a document must be an object with apiVersion, kind and metadata"))
		return
	}
	if why := refusedKind(h.Kind); why != "" {
		if h.Metadata.Name != "" {
			root = field.NewPath(fmt.Sprintf("%s%s %q", prefix, h.Kind, h.Metadata.Name))
		}
		p.errs = append(p.errs, withDetail(field.Forbidden(root, ""), "%s", why))
		return
	}
	if errs := validateHeader(&h, root); len(errs) > 0 {
		p.errs = append(p.errs, errs...)
		if !isSupportedKind(h.Kind) {
			return
		}
	}
	d := &document{root: root, where: where, kind: h.Kind, key: h.Metadata.Name}
	if h.Kind == kindLocalQueue && h.Metadata.Namespace != "" {
		d.key = h.Metadata.Namespace + "/" + h.Metadata.Name
	}
	switch {
	case h.Kind == kindConfiguration:
		// Kueue's Configuration has no metadata: it is one of a kind.
		d.root, d.key = field.NewPath(prefix+kindConfiguration), ""
	case h.Metadata.Name != "":
		d.root = field.NewPath(fmt.Sprintf("%s%s %q", prefix, h.Kind, d.key))
	}
	p.docs = append(p.docs, d)
	p.decodeBody(d, js)
}

// decodeBody decodes the whole document into the raw type of its kind.
// A Kueue field tally does not run is an error (refused.go); status is
// ignored; any other unknown field is a warning.
func (p *parser) decodeBody(d *document, js []byte) {
	var target any
	switch d.kind {
	case kindResourceFlavor:
		d.flavor = &rawResourceFlavor{}
		target = d.flavor
	case kindClusterQueue:
		d.cq = &rawClusterQueue{}
		target = d.cq
	case kindCohort:
		d.co = &rawCohort{}
		target = d.co
	case kindLocalQueue:
		d.lq = &rawLocalQueue{}
		target = d.lq
	case kindWorkloadPriorityClass:
		d.wpc = &rawPriorityClass{}
		target = d.wpc
	case kindTopology:
		d.topo = &rawTopology{}
		target = d.topo
	case kindWorkloadKind:
		d.wk = &rawWorkloadKind{}
		target = d.wk
	case kindConfiguration:
		d.conf = &rawConfiguration{}
		target = d.conf
	}
	strict, err := kjson.UnmarshalStrict(js, target, kjson.DisallowUnknownFields)
	if err != nil {
		d.broken = true
		p.errs = append(p.errs, decodeError(d.root, err, ""))
		return
	}
	for _, e := range strict {
		path := e.Error()
		if fe, ok := e.(kjson.FieldError); ok {
			path = fe.FieldPath()
		}
		if d.conf != nil {
			if e := deviceMappingField(d.root, path); e != nil {
				p.errs = append(p.errs, e)
				continue
			}
			p.warnings = append(p.warnings, unusedConfigurationField(d.root, path))
			continue
		}
		if why := refusedField(d.kind, path); why != "" {
			p.errs = append(p.errs, &field.Error{Type: field.ErrorTypeForbidden, Field: d.root.String() + "." + path, BadValue: "", Detail: why})
			continue
		}
		if ignoredField(path) {
			continue
		}
		p.warnings = append(p.warnings, fmt.Sprintf("%s.%s: unknown field, ignored", d.root, path))
	}
	if d.conf != nil {
		p.warnings = append(p.warnings, configurationWarnings(d.conf, d.root)...)
	}
	if d.flavor != nil && d.flavor.Spec.NodeSelector != nil {
		p.warnings = append(p.warnings, fmt.Sprintf("%s: accepted as an alias of spec.nodeLabels, Kueue's name for this field",
			d.root.Child("spec", "nodeSelector")))
	}
}

// The conversion of valid raw documents into the Config.

func (p *parser) build() *Config {
	cfg := &Config{
		Flavors:         map[string]*flavors.Flavor{},
		ClusterQueues:   map[string]*ClusterQueue{},
		Cohorts:         map[string][]string{},
		CohortSpecs:     map[string]*Cohort{},
		LocalQueues:     map[string]string{},
		PriorityClasses: map[string]int32{},
		Topologies:      map[string]*Topology{},
		Warnings:        p.warnings,
	}
	for _, d := range p.docs {
		switch d.kind {
		case kindResourceFlavor:
			cfg.Flavors[intern(d.key)] = toFlavor(d.flavor)
		case kindClusterQueue:
			cfg.ClusterQueues[intern(d.key)] = toClusterQueue(d.cq)
		case kindCohort:
			cfg.CohortSpecs[intern(d.key)] = toCohort(d.co)
		case kindLocalQueue:
			cfg.LocalQueues[d.key] = d.lq.Spec.ClusterQueue
			if stop := d.lq.Spec.StopPolicy; stop != "" && stop != defaultStopPolicy {
				if cfg.LocalQueueStops == nil {
					cfg.LocalQueueStops = map[string]string{}
				}
				cfg.LocalQueueStops[d.key] = stop
			}
		case kindWorkloadPriorityClass:
			cfg.PriorityClasses[d.key], _ = parseInt32(d.wpc.Value)
		case kindTopology:
			cfg.Topologies[intern(d.key)] = toTopology(d.topo)
		case kindWorkloadKind:
			cfg.WorkloadKinds = append(cfg.WorkloadKinds, toWorkloadKind(d.wk))
		case kindConfiguration:
			cfg.PodsReady, _ = podsReadyOf(d.conf, d.root)
			cfg.DeviceClasses = deviceClassesOf(d.conf.Resources)
		}
	}
	for _, f := range cfg.Flavors {
		if f.TopologyName == NodeFitTopology.Name {
			cfg.Topologies[NodeFitTopology.Name] = NodeFitTopology
		}
	}
	cfg.QueueNames = SortedKeys(cfg.ClusterQueues)
	for _, name := range cfg.QueueNames {
		if c := cfg.ClusterQueues[name].Cohort; c != "" {
			cfg.Cohorts[c] = append(cfg.Cohorts[c], name)
		}
	}
	return cfg
}

func toFlavor(raw *rawResourceFlavor) *flavors.Flavor {
	f := &flavors.Flavor{
		Name:         intern(raw.Metadata.Name),
		NodeLabels:   map[string]string{},
		NodeTaints:   raw.Spec.NodeTaints,
		Tolerations:  raw.Spec.Tolerations,
		TopologyName: intern(raw.Spec.TopologyName),
	}
	if raw.Metadata.Annotations[AnnotationNodeFit] == "true" {
		f.TopologyName = NodeFitTopology.Name
	}
	for k, v := range raw.Spec.NodeSelector {
		f.NodeLabels[k] = v
	}
	for k, v := range raw.Spec.NodeLabels {
		f.NodeLabels[k] = v
	}
	return f
}

// toTopology lists a Topology's node labels, coarsest first.
func toTopology(raw *rawTopology) *Topology {
	t := &Topology{Name: intern(raw.Metadata.Name)}
	for _, l := range raw.Spec.Levels {
		t.Levels = append(t.Levels, intern(l.NodeLabel))
	}
	return t
}

func toClusterQueue(raw *rawClusterQueue) *ClusterQueue {
	s := &raw.Spec
	cq := &ClusterQueue{
		Name:              intern(raw.Metadata.Name),
		Cohort:            intern(cohortOf(s)),
		NamespaceSelector: toSelector(s.NamespaceSelector),
		Strategy:          QueueingStrategy(orDefault(s.QueueingStrategy, string(BestEffortFIFO))),
		Preemption:        toPreemption(s.Preemption),
		FlavorFungibility: toFungibility(s.FlavorFungibility),
		FairWeight:        defaultFairWeight,
		StopPolicy:        orDefault(s.StopPolicy, defaultStopPolicy),
	}
	cq.FairSharing = s.FairSharing != nil
	if s.FairSharing != nil && !isUnset(s.FairSharing.Weight) {
		w, _ := parseQuantity(s.FairSharing.Weight)
		cq.FairWeight = w.MilliValue()
	}
	for gi := range s.ResourceGroups {
		cq.ResourceGroups = append(cq.ResourceGroups, toResourceGroup(&s.ResourceGroups[gi]))
	}
	return cq
}

func toCohort(raw *rawCohort) *Cohort {
	co := &Cohort{Name: intern(raw.Metadata.Name), Parent: intern(raw.Spec.ParentName), FairWeight: defaultFairWeight}
	co.FairSharing = raw.Spec.FairSharing != nil
	if co.FairSharing && !isUnset(raw.Spec.FairSharing.Weight) {
		w, _ := parseQuantity(raw.Spec.FairSharing.Weight)
		co.FairWeight = w.MilliValue()
	}
	for gi := range raw.Spec.ResourceGroups {
		co.ResourceGroups = append(co.ResourceGroups, toResourceGroup(&raw.Spec.ResourceGroups[gi]))
	}
	return co
}

// toSelector converts a namespaceSelector. Kueue reads a missing selector
// as "no namespace"; tally reads it as "every namespace", like {}, because
// a ClusterQueue that admits nothing is never what a pasted manifest means.
func toSelector(ls *metav1.LabelSelector) labels.Selector {
	if ls == nil {
		return labels.Everything()
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

func toResourceGroup(g *rawResourceGroup) ResourceGroup {
	rg := ResourceGroup{}
	for _, r := range coveredResources(g) {
		rg.Covered = append(rg.Covered, intern(r))
	}
	for _, f := range g.Flavors {
		fq := FlavorQuotas{Name: intern(f.Name), Quotas: map[corev1.ResourceName]Quota{}}
		for _, r := range f.Resources {
			fq.Quotas[intern(r.Name)] = toQuota(&r)
		}
		rg.Flavors = append(rg.Flavors, fq)
	}
	return rg
}

func toQuota(r *rawResourceQuota) Quota {
	q := Quota{BorrowingLimit: flavors.Unlimited, LendingLimit: flavors.Unlimited}
	nominal, _ := parseQuantity(r.NominalQuota)
	q.Nominal = flavors.FromQuantity(r.Name, nominal)
	if !isUnset(r.BorrowingLimit) {
		b, _ := parseQuantity(r.BorrowingLimit)
		q.BorrowingLimit = flavors.FromQuantity(r.Name, b)
	}
	if !isUnset(r.LendingLimit) {
		l, _ := parseQuantity(r.LendingLimit)
		q.LendingLimit = flavors.FromQuantity(r.Name, l)
	}
	return q
}

func toPreemption(raw *rawPreemption) PreemptionPolicy {
	p := PreemptionPolicy{WithinClusterQueue: PreemptNever, ReclaimWithinCohort: PreemptNever,
		BorrowWithinCohort: BorrowWithinCohort{Policy: PreemptNever}}
	if raw == nil {
		return p
	}
	p.WithinClusterQueue = orDefault(raw.WithinClusterQueue, PreemptNever)
	p.ReclaimWithinCohort = orDefault(raw.ReclaimWithinCohort, PreemptNever)
	if b := raw.BorrowWithinCohort; b != nil {
		p.BorrowWithinCohort.Policy = orDefault(b.Policy, PreemptNever)
		if !isUnset(b.MaxPriorityThreshold) {
			v, _ := parseInt32(b.MaxPriorityThreshold)
			p.BorrowWithinCohort.MaxPriorityThreshold = &v
		}
	}
	return p
}

// toFungibility applies the defaults and reads v1beta2's MayStopSearch as
// Borrow and Preempt, its v1beta1 names.
func toFungibility(raw *rawFungibility) FlavorFungibility {
	f := FlavorFungibility{WhenCanBorrow: defaultWhenCanBorrow, WhenCanPreempt: defaultWhenCanPreempt}
	if raw == nil {
		return f
	}
	f.WhenCanBorrow = orDefault(raw.WhenCanBorrow, defaultWhenCanBorrow)
	if f.WhenCanBorrow == mayStopSearch {
		f.WhenCanBorrow = "Borrow"
	}
	f.WhenCanPreempt = orDefault(raw.WhenCanPreempt, defaultWhenCanPreempt)
	if f.WhenCanPreempt == mayStopSearch {
		f.WhenCanPreempt = "Preempt"
	}
	return f
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
