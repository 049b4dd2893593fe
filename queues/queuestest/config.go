package queuestest

import (
	"fmt"
	"strings"
)

// APIVersion is the apiVersion of every document written here.
const APIVersion = "kueue.x-k8s.io/v1beta1"

// Stream joins documents into one multi-document YAML input.
func Stream(docs ...string) string { return strings.Join(docs, "---\n") }

// Flavor is a ResourceFlavor document; spec, if given, holds the lines
// under "spec:", indented by two spaces.
func Flavor(name string, spec ...string) string {
	doc := "apiVersion: " + APIVersion + "\nkind: ResourceFlavor\nmetadata: {name: " + name + "}\n"
	if len(spec) > 0 {
		doc += "spec:\n" + strings.Join(spec, "")
	}
	return doc
}

// ClusterQueue is a ClusterQueue document; spec holds the lines under
// "spec:", indented by two spaces.
func ClusterQueue(name, spec string) string {
	return "apiVersion: " + APIVersion + "\nkind: ClusterQueue\nmetadata: {name: " + name + "}\nspec:\n" + spec
}

// OneGroup is a ClusterQueue's resource group giving 4 cpu of flavor
// "default".
const OneGroup = `  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 4}]
`

// Config builds a config document by document, in order:
//
//	queuestest.New().Flavor("default").
//		ClusterQueue("q", "namespaceSelector: {}").Group("cpu").Quotas("default", "cpu=4").
//		LocalQueue("team", "default", "q").String()
type Config struct {
	docs []doc
}

// doc is one document: its text, or the ClusterQueue it renders.
type doc struct {
	text string
	cq   *clusterQueue
}

type clusterQueue struct {
	name   string
	spec   []string
	groups []group
}

type group struct {
	covered []string
	flavors []flavorQuotas
}

type flavorQuotas struct {
	name   string
	quotas []string
}

// New starts an empty config.
func New() *Config { return &Config{} }

// Flavor adds a ResourceFlavor; spec holds its spec's fields, one a
// line and unindented ("nodeLabels: {tier: spot}").
func (c *Config) Flavor(name string, spec ...string) *Config {
	return c.Doc(Flavor(name, indent(spec)...))
}

// ClusterQueue adds a ClusterQueue; spec holds its spec's fields other
// than resourceGroups, one a line and unindented ("cohort: ml",
// "namespaceSelector: {}"). Group and Quotas add its resource groups.
func (c *Config) ClusterQueue(name string, spec ...string) *Config {
	c.docs = append(c.docs, doc{cq: &clusterQueue{name: name, spec: spec}})
	return c
}

// Group adds a resource group covering the resources to the last
// ClusterQueue.
func (c *Config) Group(covered ...string) *Config {
	cq := c.lastCQ()
	cq.groups = append(cq.groups, group{covered: covered})
	return c
}

// Quotas adds a flavor to the last resource group. Each quota is
// "resource=nominal[/borrowingLimit[/lendingLimit]]", a limit written
// "-" being left out: "cpu=4", "cpu=1500m/500m/1", "cpu=2/-/1".
func (c *Config) Quotas(flavor string, quotas ...string) *Config {
	cq := c.lastCQ()
	if len(cq.groups) == 0 {
		panic("queuestest: Quotas before Group")
	}
	g := &cq.groups[len(cq.groups)-1]
	g.flavors = append(g.flavors, flavorQuotas{name: flavor, quotas: quotas})
	return c
}

// LocalQueue adds a LocalQueue of namespace ns that points at the
// ClusterQueue cq.
func (c *Config) LocalQueue(ns, name, cq string) *Config {
	return c.Doc("apiVersion: " + APIVersion + "\nkind: LocalQueue\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec: {clusterQueue: " + cq + "}\n")
}

// PriorityClass adds a WorkloadPriorityClass.
func (c *Config) PriorityClass(name string, value int32) *Config {
	return c.Doc(fmt.Sprintf("apiVersion: %s\nkind: WorkloadPriorityClass\nmetadata: {name: %s}\nvalue: %d\n", APIVersion, name, value))
}

// Doc adds a document written out.
func (c *Config) Doc(text string) *Config {
	c.docs = append(c.docs, doc{text: text})
	return c
}

// String is the config's YAML.
func (c *Config) String() string {
	docs := make([]string, len(c.docs))
	for i, d := range c.docs {
		docs[i] = d.text
		if d.cq != nil {
			docs[i] = d.cq.render()
		}
	}
	return Stream(docs...)
}

// Bytes is the config's YAML, as queues.Parse takes it.
func (c *Config) Bytes() []byte { return []byte(c.String()) }

func (c *Config) lastCQ() *clusterQueue {
	for i := len(c.docs) - 1; i >= 0; i-- {
		if c.docs[i].cq != nil {
			return c.docs[i].cq
		}
	}
	panic("queuestest: no ClusterQueue yet")
}

func (cq *clusterQueue) render() string {
	var b strings.Builder
	for _, line := range indent(cq.spec) {
		b.WriteString(line)
	}
	if len(cq.groups) > 0 {
		b.WriteString("  resourceGroups:\n")
	}
	for _, g := range cq.groups {
		fmt.Fprintf(&b, "  - coveredResources: [%s]\n    flavors:\n", strings.Join(g.covered, ", "))
		for _, f := range g.flavors {
			resources := make([]string, len(f.quotas))
			for i, q := range f.quotas {
				resources[i] = quota(q)
			}
			fmt.Fprintf(&b, "    - name: %s\n      resources: [%s]\n", f.name, strings.Join(resources, ", "))
		}
	}
	return ClusterQueue(cq.name, b.String())
}

// quota renders "cpu=1500m/500m/1" as a resource's quotas.
func quota(q string) string {
	name, values, ok := strings.Cut(q, "=")
	if !ok {
		panic("queuestest: quota " + q + " is not resource=nominal")
	}
	v := strings.SplitN(values, "/", 3)
	out := "{name: " + name + ", nominalQuota: " + v[0]
	for i, key := range []string{"borrowingLimit", "lendingLimit"} {
		if len(v) > i+1 && v[i+1] != "-" {
			out += ", " + key + ": " + v[i+1]
		}
	}
	return out + "}"
}

// indent indents each field by two spaces and ends it with a newline.
func indent(fields []string) []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = "  " + f + "\n"
	}
	return out
}
