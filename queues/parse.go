package queues

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// The kinds of config documents.
const (
	kindResourceFlavor        = "ResourceFlavor"
	kindClusterQueue          = "ClusterQueue"
	kindLocalQueue            = "LocalQueue"
	kindWorkloadPriorityClass = "WorkloadPriorityClass"
	kindCohort                = "Cohort"
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

func supportedAPIVersions() []string {
	return []string{"tally.dev/v1", "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"}
}

func supportedKinds() []string {
	return []string{kindResourceFlavor, kindClusterQueue, kindLocalQueue, kindWorkloadPriorityClass, kindWorkloadKind}
}

// Parse reads a config: multi-document YAML holding ResourceFlavor,
// ClusterQueue, LocalQueue and WorkloadPriorityClass documents with Kueue's
// field names, and tally's WorkloadKind documents. It returns the validated Config, or nil and every error
// found, each with its field path. Warnings, such as unknown fields, never
// make a config invalid.
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
	lq     *rawLocalQueue
	wpc    *rawPriorityClass
	wk     *rawWorkloadKind
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

// chunk is the text of one document and the line it starts on.
type chunk struct {
	text []byte
	line int
}

// splitDocuments splits a YAML stream at its document markers: lines that
// start with "---" or "..." followed by nothing, a blank or a comment. Text
// after "---" on the same line begins the next document. It returns at most
// limit+1 chunks, so the caller can tell there are more than limit.
func splitDocuments(data []byte, limit int) []chunk {
	var out []chunk
	start, startLine, line := 0, 1, 1
	for pos := 0; pos < len(data); line++ {
		next := len(data)
		if nl := bytes.IndexByte(data[pos:], '\n'); nl >= 0 {
			next = pos + nl + 1
		}
		if isMarker(data[pos:next]) {
			out = append(out, chunk{data[start:pos], startLine})
			if len(out) > limit {
				return out
			}
			start, startLine = pos+3, line
			if data[pos] == '.' {
				start, startLine = next, line+1
			}
		}
		pos = next
	}
	return append(out, chunk{data[start:], startLine})
}

func isMarker(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) && !bytes.HasPrefix(line, []byte("...")) {
		return false
	}
	rest := bytes.TrimRight(line[3:], "\r\n")
	if line[0] == '.' {
		rest = bytes.TrimLeft(rest, " \t")
		return len(rest) == 0 || rest[0] == '#'
	}
	return len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t'
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
	if h.Metadata.Name != "" {
		d.root = field.NewPath(fmt.Sprintf("%s%s %q", prefix, h.Kind, d.key))
	}
	p.docs = append(p.docs, d)
	p.decodeBody(d, js)
}

// decodeBody decodes the whole document into the raw type of its kind.
// Unknown fields are warnings: Kueue manifests may carry fields tally does
// not read, such as status or admissionChecks.
func (p *parser) decodeBody(d *document, js []byte) {
	var target any
	switch d.kind {
	case kindResourceFlavor:
		d.flavor = &rawResourceFlavor{}
		target = d.flavor
	case kindClusterQueue:
		d.cq = &rawClusterQueue{}
		target = d.cq
	case kindLocalQueue:
		d.lq = &rawLocalQueue{}
		target = d.lq
	case kindWorkloadPriorityClass:
		d.wpc = &rawPriorityClass{}
		target = d.wpc
	case kindWorkloadKind:
		d.wk = &rawWorkloadKind{}
		target = d.wk
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
		p.warnings = append(p.warnings, fmt.Sprintf("%s.%s: unknown field, ignored", d.root, path))
	}
	if d.flavor != nil && d.flavor.Spec.NodeSelector != nil {
		p.warnings = append(p.warnings, fmt.Sprintf("%s: accepted as an alias of spec.nodeLabels, Kueue's name for this field",
			d.root.Child("spec", "nodeSelector")))
	}
}

// yamlLine matches the line numbers in YAML errors ("line 12: ...").
var yamlLine = regexp.MustCompile(`line (\d+):`)

// yamlError renders a YAML error on one line, with line numbers counted
// from the start of the input rather than of the document.
func yamlError(err error, firstLine int) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	return yamlLine.ReplaceAllStringFunc(msg, func(m string) string {
		n, convErr := strconv.Atoi(m[len("line ") : len(m)-1])
		if convErr != nil {
			return m
		}
		return fmt.Sprintf("line %d:", n+firstLine-1)
	})
}

// decodeError turns a JSON decoding error into a field error. A type
// mismatch becomes "must be a list, not a string" at the field's path;
// anything else is reported as is. rootDetail, if set, replaces the
// message of a mismatch at the root.
func decodeError(root *field.Path, err error, rootDetail string) *field.Error {
	got, path, want, ok := typeError(err)
	if !ok {
		return withDetail(field.Invalid(root, nil, ""), "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if path == "" {
		detail := fmt.Sprintf("must be %s, not %s", want, got)
		if rootDetail != "" {
			detail = fmt.Sprintf("%s, not %s", rootDetail, got)
		}
		return withDetail(field.TypeInvalid(root, nil, ""), "%s", detail)
	}
	e := withDetail(field.TypeInvalid(root, nil, ""), "must be %s, not %s", want, got)
	if want == "a string" && (got == "a boolean" || got == "a number") {
		// YAML reads true, no, y and 10 unquoted as booleans and numbers.
		e.Detail += "; quote it"
	}
	e.Field = root.String() + "." + path
	return e
}

// typeError unpacks a JSON type mismatch: what was found, at which dotted
// path, and what was expected. The decoder's error type is internal to its
// module, so its exported fields are read by reflection.
func typeError(err error) (got, path, want string, ok bool) {
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return "", "", "", false
	}
	v = v.Elem()
	value, fieldPath, typ := v.FieldByName("Value"), v.FieldByName("Field"), v.FieldByName("Type")
	if value.Kind() != reflect.String || fieldPath.Kind() != reflect.String || !typ.IsValid() || !typ.CanInterface() {
		return "", "", "", false
	}
	t, isType := typ.Interface().(reflect.Type)
	if !isType || t == nil {
		return "", "", "", false
	}
	return describeJSON(value.String()), fieldPath.String(), describeKind(t), true
}

// describeJSON names a JSON value as the decoder reports it ("array",
// "number 1.5").
func describeJSON(v string) string {
	switch {
	case v == "array":
		return "a list"
	case v == "object":
		return "an object"
	case v == "string":
		return "a string"
	case v == "bool":
		return "a boolean"
	case strings.HasPrefix(v, "number"):
		return "a number"
	}
	return v
}

func describeKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "an object"
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

// Shorten cuts a value for display in a message.
func Shorten(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
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

// The conversion of valid raw documents into the Config.

func (p *parser) build() *Config {
	cfg := &Config{
		Flavors:         map[string]*flavors.Flavor{},
		ClusterQueues:   map[string]*ClusterQueue{},
		Cohorts:         map[string][]string{},
		LocalQueues:     map[string]string{},
		PriorityClasses: map[string]int32{},
		Warnings:        p.warnings,
	}
	for _, d := range p.docs {
		switch d.kind {
		case kindResourceFlavor:
			cfg.Flavors[d.key] = toFlavor(d.flavor)
		case kindClusterQueue:
			cfg.ClusterQueues[d.key] = toClusterQueue(d.cq)
		case kindLocalQueue:
			cfg.LocalQueues[d.key] = d.lq.Spec.ClusterQueue
		case kindWorkloadPriorityClass:
			cfg.PriorityClasses[d.key], _ = parseInt32(d.wpc.Value)
		case kindWorkloadKind:
			cfg.WorkloadKinds = append(cfg.WorkloadKinds, toWorkloadKind(d.wk))
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
		Name:        raw.Metadata.Name,
		NodeLabels:  map[string]string{},
		NodeTaints:  raw.Spec.NodeTaints,
		Tolerations: raw.Spec.Tolerations,
	}
	for k, v := range raw.Spec.NodeSelector {
		f.NodeLabels[k] = v
	}
	for k, v := range raw.Spec.NodeLabels {
		f.NodeLabels[k] = v
	}
	return f
}

func toClusterQueue(raw *rawClusterQueue) *ClusterQueue {
	s := &raw.Spec
	cq := &ClusterQueue{
		Name:              raw.Metadata.Name,
		Cohort:            cohortOf(s),
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
	rg := ResourceGroup{Covered: coveredResources(g)}
	for _, f := range g.Flavors {
		fq := FlavorQuotas{Name: f.Name, Quotas: map[corev1.ResourceName]Quota{}}
		for _, r := range f.Resources {
			fq.Quotas[r.Name] = toQuota(&r)
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
