package main

// The docs tests keep README.md and docs/*.md true to the code: their
// links, the make targets they name, the flags of tally's commands and the
// metrics. Each check is a pure function over the documents (a map of path
// to text, paths relative to the repository root, with forward slashes)
// and what the code has; the table tests below prove each one fails where
// it must and stays quiet on what is not its business, and TestDocs runs
// them all over the real files. None needs a cluster.
//
// Links. Every relative link (inline [text](target), reference
// definitions [ref]: target, and <a href>, <img src> in HTML) outside
// fenced code blocks and code spans must name a file or directory that
// exists, relative to the linking file ("/x" relative to the repository
// root). A #fragment of a link to a Markdown file, or of a link within the
// file, must be one of its anchors: the GitHub slug of a heading outside
// code blocks (lower case; letters, digits, marks, '-' and '_' kept, spaces
// to '-', all else dropped; a repeated slug gets -1, -2, ...), or the id or
// name of an HTML element. Links with a scheme (https:, mailto:, ...) are
// not checked.
//
// Make targets. `make` names targets where it is a command: at the start
// of a command in a fenced code block or a code span (the first word, or
// after | & ; ( -- a `$` prompt, sudo, env or VAR=value words). Its
// arguments up to the end of the command are targets, except options and
// VAR=value words. A make with -C or -f reads another Makefile, and a code
// span right after another's possessive ("Kueue's `make
// run-performance-scheduler`") is that project's: neither is checked. In
// prose "make" is usually the English verb, so there it names a target
// only after "run", "runs", "ran", "running", "rerun", "by", "via",
// "after" or "before" (the docs write commands as code spans; those are
// always checked).
//
// Flags. A flag is attributed to a tally command (serve, status, explain,
// check-config; `tally --flag` is serve) in these contexts, and only there:
//   - command: in a code block line or a code span, the words after a
//     `tally COMMAND` (tally, bin/tally, ... at a command position as for
//     make) up to the end of that command; -x and --x both count;
//   - line: a --flag in prose, or in a code span made only of flags
//     (`--config FILE`), on a line that names `tally COMMAND` (a table row
//     is not such a line: its description may name a command its flag
//     is not of, as the bench's "| `-tally-arg=ARG` | Passes an argument
//     to `tally serve` |");
//   - table: likewise in a table whose header names `tally COMMAND`, or
//     whose introducing paragraph names it and says the table is of flags
//     ("flag", "switch", "option" or --help, as "`tally serve --help`
//     lists the flags.");
//   - section: likewise under a heading that names `tally COMMAND` (or is
//     just the command's name), down to the next heading of its level.
//
// The nearest context wins (line, then table, then section). A --flag so
// attributed must be a flag of one of the commands named; a single-dash
// one outside a command (`-o json`) only counts as documenting a flag, as
// prose single-dash words are too often another tool's (`-l` of kubectl).
// A code span right after another's possessive ("the API server's
// `--max-requests-inflight`") is not tally's. Flags in no such context
// (kubectl --namespace, helm --set, go test -run, make's VAR=value, the
// bench's -tally-arg, flags of kube-apiserver) are not tally's and are not
// checked. Every flag a command's --help prints (-h and -help aside) must be
// attributed to it somewhere: a flag named only elsewhere (`--pprof-bind-address`
// in a benchmark's prose) is not documented as tally's. The flag sets are
// the real ones: the flags `tally COMMAND --help` prints, through run
// (main.go).
//
// Metrics. Every tally_[a-z0-9_]+ word anywhere in the documents, code
// included, must be a metric tally registers, or a histogram's with
// _bucket, _sum or _count; `tally_x_*` must be the prefix of one. Every
// registered metric must be named somewhere. The registered metrics are
// those ledger.Setup registers for tally serve: the ledger's (ledger.New)
// and the Event queue's (ledger.NewEventQueue, tally_events_dropped_total,
// which metrics.Names does not list), recorded from their collectors'
// descriptions. tally_job_labels, tally_finished_labels and
// tally_namespace_labels are not metrics: they are the names of the
// ledger's workqueues, which tally's /metrics does expose, as the name and
// controller labels of controller-runtime's workqueue_* metrics
// (workqueue_depth{name="tally_job_labels"}). The docs may name them as
// such; they need not (they are label values, not metrics), and any other
// tally_ word that is neither a metric nor a queue name fails. The queue
// names are read from controller-runtime's registry once ledger.New made
// the queues, so that a renamed queue is seen.

import (
	"errors"
	"fmt"
	"html"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"tally.dev/tally/ledger"
	"tally.dev/tally/ledger/metrics"
)

// docProblem is one untrue thing in a document. line 0: the documents as
// a whole (file then names them).
type docProblem struct {
	file string
	line int
	msg  string
}

func (p docProblem) String() string {
	if p.line == 0 {
		return p.file + ": " + p.msg
	}
	return fmt.Sprintf("%s:%d: %s", p.file, p.line, p.msg)
}

// allDocs names the documents as a whole in a docProblem.
const allDocs = "README.md, docs/*.md"

func sortProblems(ps []docProblem) []docProblem {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].file != ps[j].file {
			return ps[i].file < ps[j].file
		}
		return ps[i].line < ps[j].line
	})
	return ps
}

// ---- The Markdown model.

// mdDoc is a Markdown document split into what the checks read.
type mdDoc struct {
	name string
	// lines are the raw lines.
	lines []string
	// code: the line is in a fenced code block (its fences included).
	code []bool
	// prose is each line with code block lines empty and code spans
	// blanked out with spaces.
	prose []string
	// spans are the code spans outside code blocks.
	spans    []codeSpan
	headings []heading
	// proseText is prose joined with "\n"; lineStarts the offset of each
	// line in it.
	proseText  string
	lineStarts []int
}

type codeSpan struct {
	line int // 1-based, where the span opens
	text string
	// foreign: the word before the span is another's possessive
	// ("Kueue's `make run-performance-scheduler`", "the API server's
	// `--max-requests-inflight`"): the span is not tally's.
	foreign bool
}

type heading struct {
	line, level int // line is 0-based
	text        string
}

var (
	fenceRE      = regexp.MustCompile("^[ \t]*(`{3,}|~{3,})(.*)$")
	possessiveRE = regexp.MustCompile(`([A-Za-z0-9][\w.-]*)(?:'|’)s[ \t\n]*$`)
)

func parseDoc(name, text string) *mdDoc {
	d := &mdDoc{name: name, lines: strings.Split(text, "\n")}
	n := len(d.lines)
	d.code, d.prose = make([]bool, n), make([]string, n)
	fence := ""
	for i, l := range d.lines {
		l = strings.TrimRight(l, "\r")
		d.lines[i] = l
		if fence == "" {
			if m := fenceRE.FindStringSubmatch(l); m != nil && !(m[1][0] == '`' && strings.Contains(m[2], "`")) {
				fence = m[1]
				d.code[i] = true
				continue
			}
			d.prose[i] = l
			continue
		}
		d.code[i] = true
		t := strings.TrimSpace(l)
		if len(t) >= len(fence) && strings.Trim(t, fence[:1]) == "" {
			fence = ""
		}
	}
	d.blankSpans()
	d.findHeadings()
	return d
}

// blankSpans finds the code spans of the prose (a run of backticks up to
// the next run of as many, within a paragraph) and blanks them out.
func (d *mdDoc) blankSpans() {
	b := []byte(strings.Join(d.prose, "\n"))
	d.lineStarts = []int{0}
	for i, c := range b {
		if c == '\n' {
			d.lineStarts = append(d.lineStarts, i+1)
		}
	}
	blankLineAfter := func(k int) bool { // b[k] is '\n'
		for p := k + 1; p < len(b) && b[p] != '\n'; p++ {
			if b[p] != ' ' && b[p] != '\t' {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(b); {
		switch b[i] {
		case '\\':
			i += 2
			continue
		case '`':
		default:
			i++
			continue
		}
		j := i
		for j < len(b) && b[j] == '`' {
			j++
		}
		run, closed := j-i, -1
		for k := j; k < len(b); {
			if b[k] == '\n' && blankLineAfter(k) {
				break
			}
			if b[k] != '`' {
				k++
				continue
			}
			e := k
			for e < len(b) && b[e] == '`' {
				e++
			}
			if e-k == run {
				closed = k
				break
			}
			k = e
		}
		if closed < 0 {
			i = j
			continue
		}
		text := strings.TrimSpace(strings.ReplaceAll(string(b[j:closed]), "\n", " "))
		m := possessiveRE.FindSubmatch(b[max(0, i-80):i])
		foreign := m != nil && !tallyCmds[strings.ToLower(string(m[1]))] && !strings.EqualFold(string(m[1]), "tally")
		d.spans = append(d.spans, codeSpan{line: d.lineAt(i), text: text, foreign: foreign})
		end := closed + run
		for p := i; p < end; p++ {
			if b[p] != '\n' {
				b[p] = ' '
			}
		}
		i = end
	}
	d.proseText = string(b)
	d.prose = strings.Split(d.proseText, "\n")
}

// lineAt is the 1-based line of offset off of proseText.
func (d *mdDoc) lineAt(off int) int {
	return sort.Search(len(d.lineStarts), func(i int) bool { return d.lineStarts[i] > off })
}

var (
	atxRE      = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*))?$`)
	atxCloseRE = regexp.MustCompile(`(?:^|[ \t]+)#+[ \t]*$`)
	setextRE   = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	notSetext  = regexp.MustCompile(`^(?:[#|>*+-]|[0-9]+[.)])`)
)

func (d *mdDoc) findHeadings() {
	for i, l := range d.lines {
		if d.code[i] {
			continue
		}
		if m := atxRE.FindStringSubmatch(l); m != nil {
			d.headings = append(d.headings, heading{line: i, level: len(m[1]), text: strings.TrimSpace(atxCloseRE.ReplaceAllString(m[2], ""))})
			continue
		}
		t := strings.TrimSpace(l)
		if t == "" || notSetext.MatchString(t) || i+1 >= len(d.lines) || d.code[i+1] || (i > 0 && !d.code[i-1] && strings.TrimSpace(d.lines[i-1]) != "") {
			continue
		}
		if m := setextRE.FindStringSubmatch(d.lines[i+1]); m != nil {
			level := 2
			if m[1][0] == '=' {
				level = 1
			}
			d.headings = append(d.headings, heading{line: i, level: level, text: t})
		}
	}
}

var (
	mdLinkRE      = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	mdRefLinkRE   = regexp.MustCompile(`!?\[([^\]]*)\]\[[^\]]*\]`)
	htmlTagRE     = regexp.MustCompile(`<[^>]*>`)
	mdEscapeRE    = regexp.MustCompile("\\\\([!-/:-@\\[-`{-~])")
	emphOpenRE    = regexp.MustCompile(`(^|[^\p{L}\p{N}])[_*]+`)
	emphCloseRE   = regexp.MustCompile(`[_*]+([^\p{L}\p{N}]|$)`)
	anchorAttrRE  = regexp.MustCompile(`(?i)<[a-z][a-z0-9]*\b[^>]*?\s(?:id|name)\s*=\s*["']([^"']+)["']`)
	backtickRunRE = regexp.MustCompile("`+")
)

// plainHeading is the text GitHub renders a heading's Markdown as.
func plainHeading(s string) string {
	s = mdLinkRE.ReplaceAllString(s, "$1")
	s = mdRefLinkRE.ReplaceAllString(s, "$1")
	var b strings.Builder
	plain := func(t string) {
		t = htmlTagRE.ReplaceAllString(t, "")
		t = mdEscapeRE.ReplaceAllString(t, "$1")
		t = emphOpenRE.ReplaceAllString(t, "$1")
		t = emphCloseRE.ReplaceAllString(t, "$1")
		b.WriteString(html.UnescapeString(t))
	}
	for s != "" {
		loc := backtickRunRE.FindStringIndex(s)
		if loc == nil {
			plain(s)
			break
		}
		run := s[loc[0]:loc[1]]
		rest := s[loc[1]:]
		end := -1
		for off := 0; ; {
			l := backtickRunRE.FindStringIndex(rest[off:])
			if l == nil {
				break
			}
			if l[1]-l[0] == len(run) {
				end = off + l[0]
				break
			}
			off += l[1]
		}
		if end < 0 {
			plain(s[:loc[1]])
			s = rest
			continue
		}
		plain(s[:loc[0]])
		b.WriteString(strings.TrimSpace(rest[:end]))
		s = rest[end+len(run):]
	}
	return strings.TrimSpace(b.String())
}

// slugify is GitHub's anchor for a heading's text (github-slugger).
func slugify(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the fragments a link to d may name.
func (d *mdDoc) anchors() map[string]bool {
	set := map[string]bool{}
	seen := map[string]int{}
	for _, h := range d.headings {
		orig := slugify(plainHeading(h.text))
		s := orig
		for {
			if _, dup := seen[s]; !dup {
				break
			}
			seen[orig]++
			s = orig + "-" + strconv.Itoa(seen[orig])
		}
		seen[s] = 0
		set[s] = true
	}
	for _, m := range anchorAttrRE.FindAllStringSubmatch(d.proseText, -1) {
		set[m[1]] = true
	}
	return set
}

func parseDocs(docs map[string]string) []*mdDoc {
	names := make([]string, 0, len(docs))
	for n := range docs {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*mdDoc, len(names))
	for i, n := range names {
		out[i] = parseDoc(n, docs[n])
	}
	return out
}

// ---- Links.

var (
	inlineLinkRE = regexp.MustCompile(`\]\(\s*(<[^>\n]*>|[^\s()]+)(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)`)
	refDefRE     = regexp.MustCompile(`(?m)^ {0,3}\[[^\]\n]+\]:[ \t]*(<[^>\n]*>|\S+)`)
	htmlLinkRE   = regexp.MustCompile(`(?i)<(?:a|img|source)\b[^>]*?\s(?:href|src)\s*=\s*["']([^"']*)["']`)
	schemeRE     = regexp.MustCompile(`^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//)`)
)

// brokenLinks checks the relative links of docs. exists says whether a
// path (relative to the repository root) is a file or directory; read
// gives a Markdown file outside docs, for its anchors.
func brokenLinks(docs map[string]string, exists func(string) bool, read func(string) (string, bool)) []docProblem {
	var out []docProblem
	parsed := parseDocs(docs)
	anchorsOf := map[string]map[string]bool{}
	for _, d := range parsed {
		anchorsOf[d.name] = d.anchors()
	}
	anchorsAt := func(p string) (map[string]bool, bool) {
		if a, ok := anchorsOf[p]; ok {
			return a, true
		}
		text, ok := read(p)
		if !ok {
			return nil, false
		}
		anchorsOf[p] = parseDoc(p, text).anchors()
		return anchorsOf[p], true
	}
	for _, d := range parsed {
		type link struct {
			off    int
			target string
		}
		var links []link
		for _, re := range []*regexp.Regexp{inlineLinkRE, refDefRE, htmlLinkRE} {
			for _, m := range re.FindAllStringSubmatchIndex(d.proseText, -1) {
				links = append(links, link{m[0], d.proseText[m[2]:m[3]]})
			}
		}
		sort.SliceStable(links, func(i, j int) bool { return links[i].off < links[j].off })
		for _, l := range links {
			target := strings.TrimSuffix(strings.TrimPrefix(l.target, "<"), ">")
			if target == "" || schemeRE.MatchString(target) {
				continue
			}
			bad := func(format string, args ...any) {
				out = append(out, docProblem{d.name, d.lineAt(l.off), fmt.Sprintf("link %q: ", l.target) + fmt.Sprintf(format, args...)})
			}
			p, frag, _ := strings.Cut(target, "#")
			p, _, _ = strings.Cut(p, "?")
			if u, err := url.PathUnescape(p); err == nil {
				p = u
			}
			if u, err := url.PathUnescape(frag); err == nil {
				frag = u
			}
			file := d.name
			if p != "" {
				if strings.HasPrefix(p, "/") {
					file = path.Clean(strings.TrimPrefix(p, "/"))
				} else {
					file = path.Clean(path.Join(path.Dir(d.name), p))
				}
				if !exists(file) {
					bad("%s does not exist", file)
					continue
				}
			}
			if frag == "" || !strings.EqualFold(path.Ext(file), ".md") {
				continue
			}
			a, ok := anchorsAt(file)
			if !ok {
				bad("cannot read %s for its anchors", file)
				continue
			}
			if !a[frag] {
				bad("no heading or anchor %q in %s", frag, file)
			}
		}
	}
	return sortProblems(out)
}

// ---- Commands in code: make's and tally's.

// shellWords splits s roughly as a shell does: words with their quotes
// removed, and each of | & ; ( ) < > a word of its own.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			inWord = true
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				cur.WriteString(s[i+1:])
				i = len(s)
				break
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '\\' && i+1 < len(s):
			cur.WriteByte(s[i+1])
			inWord = true
			i++
		case c == ' ' || c == '\t' || c == '\n':
			flush()
		case strings.IndexByte("|&;()<>", c) >= 0:
			flush()
			words = append(words, string(c))
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words
}

var (
	assignRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	commentRE = regexp.MustCompile(`(?:^|[ \t])#.*$`)
)

func isOperator(w string) bool { return len(w) == 1 && strings.Contains("|&;()<>", w) }

// shellCommands returns the commands of a line of shell: each as its
// words, from the command's name to the end of the command.
func shellCommands(line string) [][]string {
	words := shellWords(commentRE.ReplaceAllString(line, ""))
	var cmds [][]string
	atStart := true
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "|" || w == "&" || w == ";" || w == "(" || w == "--":
			atStart = true
		case !atStart:
		case w == "$" || w == "sudo" || w == "env" || w == "time" || w == "exec" || w == "then" || w == "do" || w == "else" || w == "!" || assignRE.MatchString(w):
		case isOperator(w):
			atStart = false
		default:
			j := i + 1
			for j < len(words) && !isOperator(words[j]) {
				j++
			}
			cmds = append(cmds, words[i:j])
			atStart = false
		}
	}
	return cmds
}

// codeLine is a line of shell in the docs: a code block line (with its
// continuation lines) or a code span.
type codeLine struct {
	line int
	text string
}

func codeLines(d *mdDoc) []codeLine {
	var out []codeLine
	for i := 0; i < len(d.lines); i++ {
		if !d.code[i] || fenceRE.MatchString(d.lines[i]) {
			continue
		}
		start, text := i, d.lines[i]
		for strings.HasSuffix(text, "\\") && i+1 < len(d.lines) && d.code[i+1] && !fenceRE.MatchString(d.lines[i+1]) {
			i++
			text = strings.TrimSuffix(text, "\\") + " " + d.lines[i]
		}
		out = append(out, codeLine{start + 1, text})
	}
	for _, s := range d.spans {
		if !s.foreign {
			out = append(out, codeLine{s.line, s.text})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].line < out[j].line })
	return out
}

// ---- Make targets.

// makeTargets are the targets a Makefile defines.
func makeTargets(makefile string) map[string]bool {
	targets := map[string]bool{}
	continued := false
	for _, l := range strings.Split(makefile, "\n") {
		prev := continued
		continued = strings.HasSuffix(l, "\\")
		if prev || l == "" || l[0] == '\t' || l[0] == ' ' || l[0] == '#' {
			continue
		}
		before, after, ok := strings.Cut(l, ":")
		if !ok || strings.ContainsAny(before, "=") || strings.HasPrefix(after, "=") || strings.HasPrefix(after, ":=") {
			continue
		}
		for _, t := range strings.Fields(before) {
			targets[t] = true
		}
	}
	return targets
}

var (
	targetRE    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./-]*$`)
	proseMakeRE = regexp.MustCompile(`(?i)\b(?:run|runs|ran|running|rerun|reruns|by|via|after|before)\s+make\s+([A-Za-z0-9_][A-Za-z0-9_./-]*)`)
	// makeArgOpts are make's options that take the next word.
	makeArgOpts = map[string]bool{"-C": true, "-f": true, "-I": true, "-o": true, "-W": true, "--directory": true,
		"--file": true, "--makefile": true, "--include-dir": true, "--old-file": true, "--assume-old": true,
		"--what-if": true, "--new-file": true, "--assume-new": true}
	numberRE = regexp.MustCompile(`^[0-9]+$`)
)

// otherMakefile: make's option w makes it read another Makefile, whose
// targets are not checked.
func otherMakefile(w string) bool {
	for _, o := range []string{"-C", "-f", "--directory", "--file", "--makefile"} {
		if strings.HasPrefix(w, o) {
			return true
		}
	}
	return false
}

// unknownMakeTargets checks the make targets docs name against targets.
func unknownMakeTargets(docs map[string]string, targets map[string]bool) []docProblem {
	var out []docProblem
	check := func(d *mdDoc, line int, target string) {
		if !targets[target] {
			out = append(out, docProblem{d.name, line, fmt.Sprintf("make %s: the Makefile has no target %q", target, target)})
		}
	}
	for _, d := range parseDocs(docs) {
		for _, cl := range codeLines(d) {
			for _, cmd := range shellCommands(cl.text) {
				if cmd[0] != "make" || slices.ContainsFunc(cmd, otherMakefile) {
					continue
				}
				for k := 1; k < len(cmd); k++ {
					switch w := cmd[k]; {
					case strings.HasPrefix(w, "-"):
						if makeArgOpts[w] {
							k++
						}
					case assignRE.MatchString(w), numberRE.MatchString(w), !targetRE.MatchString(w):
					default:
						check(d, cl.line, w)
					}
				}
			}
		}
		for _, m := range proseMakeRE.FindAllStringSubmatchIndex(d.proseText, -1) {
			if t := strings.TrimRight(d.proseText[m[2]:m[3]], "./-"); t != "" {
				check(d, d.lineAt(m[2]), t)
			}
		}
	}
	return sortProblems(out)
}

// ---- Flags.

// flagMention is a flag named in a context that attributes it to tally
// commands.
type flagMention struct {
	file string
	line int
	cmds []string
	name string
	// written is the flag as the docs write it (-x, --x).
	written string
	// strict: it must be a flag of one of cmds; else it only documents.
	strict bool
}

var (
	tallyCmdRE  = regexp.MustCompile(`(?:^|[^\w./-])(?:[\w./-]*/)?tally\s+(serve|status|explain|check-config)\b`)
	flagTableRE = regexp.MustCompile(`(?i)\bflags?\b|\bswitch(?:es)?\b|\boptions?\b|--help\b`)
	flagWordRE  = regexp.MustCompile(`^(--?)([A-Za-z][A-Za-z0-9_.-]*)(?:=.*)?$`)
	proseFlagRE = regexp.MustCompile(`(?:^|[\s(\[,;/"'])--([A-Za-z][A-Za-z0-9-]*)`)
	tallyCmds   = map[string]bool{"serve": true, "status": true, "explain": true, "check-config": true, "version": true, "help": true}
	// flagPlaceholders stand for any flag, as in "tally --flag ...".
	flagPlaceholders = map[string]bool{"flag": true, "flags": true, "FLAG": true, "FLAGS": true}
)

// namedCmds are the tally commands s names as `tally COMMAND`.
func namedCmds(s string) []string {
	var cmds []string
	for _, m := range tallyCmdRE.FindAllStringSubmatch(s, -1) {
		if !slices.Contains(cmds, m[1]) {
			cmds = append(cmds, m[1])
		}
	}
	sort.Strings(cmds)
	return cmds
}

// flagContexts gives, per line of d (0-based), the commands a flag in its
// prose is attributed to: those the line names, else those of the table
// it is in, else those of its section.
func flagContexts(d *mdDoc) [][]string {
	n := len(d.lines)
	ctx := make([][]string, n)
	// Sections.
	type open struct {
		level int
		cmds  []string
	}
	var stack []open
	hi := 0
	for i := 0; i < n; i++ {
		if hi < len(d.headings) && d.headings[hi].line == i {
			h := d.headings[hi]
			hi++
			for len(stack) > 0 && stack[len(stack)-1].level >= h.level {
				stack = stack[:len(stack)-1]
			}
			cmds := namedCmds(h.text)
			if p := plainHeading(h.text); tallyCmds[p] && p != "version" && p != "help" {
				cmds = []string{p}
			}
			stack = append(stack, open{h.level, cmds})
		}
		for k := len(stack) - 1; k >= 0; k-- {
			if len(stack[k].cmds) > 0 {
				ctx[i] = stack[k].cmds
				break
			}
		}
	}
	// Tables: a run of lines starting with '|', with the paragraph before;
	// a table of a command's flags is introduced as one.
	isTable := func(i int) bool { return !d.code[i] && strings.HasPrefix(strings.TrimSpace(d.lines[i]), "|") }
	for i := 0; i < n; {
		if !isTable(i) {
			i++
			continue
		}
		end := i
		for end < n && isTable(end) {
			end++
		}
		intro := ""
		j := i - 1
		for j >= 0 && !d.code[j] && strings.TrimSpace(d.lines[j]) == "" {
			j--
		}
		for ; j >= 0 && !d.code[j] && strings.TrimSpace(d.lines[j]) != "" && !isTable(j) && !atxRE.MatchString(d.lines[j]); j-- {
			intro = d.lines[j] + "\n" + intro
		}
		cmds := namedCmds(d.lines[i])
		if len(cmds) == 0 && flagTableRE.MatchString(intro) {
			cmds = namedCmds(intro)
		}
		if len(cmds) > 0 {
			for k := i; k < end; k++ {
				ctx[k] = cmds
			}
		}
		i = end
	}
	// Lines, but for table rows: a row that names a command in its
	// description ("| `--tally-arg=ARG` | Passes an argument to `tally
	// serve` |", a flag of the bench) is about the table's flag.
	for i := 0; i < n; i++ {
		if d.code[i] {
			ctx[i] = nil
		} else if cmds := namedCmds(d.lines[i]); len(cmds) > 0 && !isTable(i) {
			ctx[i] = cmds
		}
	}
	return ctx
}

// flagMentions lists the flags docs attribute to tally commands.
func flagMentions(docs map[string]string) []flagMention {
	var out []flagMention
	for _, d := range parseDocs(docs) {
		// Commands.
		for _, cl := range codeLines(d) {
			for _, cmd := range shellCommands(cl.text) {
				if path.Base(cmd[0]) != "tally" || len(cmd) < 2 {
					continue
				}
				name, args := "serve", cmd[1:]
				if tallyCmds[cmd[1]] {
					name, args = cmd[1], cmd[2:]
				} else if !strings.HasPrefix(cmd[1], "-") {
					continue
				}
				for _, w := range args {
					if w == "--" {
						break
					}
					if m := flagWordRE.FindStringSubmatch(w); m != nil && !flagPlaceholders[m[2]] {
						out = append(out, flagMention{d.name, cl.line, []string{name}, m[2], m[1] + m[2], true})
					}
				}
			}
		}
		// Prose, and code spans made of flags.
		ctx := flagContexts(d)
		for _, s := range d.spans {
			cmds := ctx[s.line-1]
			words := strings.Fields(s.text)
			if len(cmds) == 0 || len(words) == 0 || !strings.HasPrefix(words[0], "-") || s.foreign {
				continue
			}
			for _, w := range words {
				if m := flagWordRE.FindStringSubmatch(w); m != nil && !flagPlaceholders[m[2]] {
					out = append(out, flagMention{d.name, s.line, cmds, m[2], m[1] + m[2], m[1] == "--"})
				}
			}
		}
		for i, l := range d.prose {
			if len(ctx[i]) == 0 {
				continue
			}
			for _, m := range proseFlagRE.FindAllStringSubmatch(l, -1) {
				if !flagPlaceholders[m[1]] {
					out = append(out, flagMention{d.name, i + 1, ctx[i], m[1], "--" + m[1], true})
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].file != out[j].file {
			return out[i].file < out[j].file
		}
		return out[i].line < out[j].line
	})
	return out
}

// badFlags checks the flags docs attribute to tally's commands against
// sets (a command's flags, as its --help prints them), and that docs
// name every flag of every set.
func badFlags(docs map[string]string, sets map[string][]string) []docProblem {
	var out []docProblem
	mentions := flagMentions(docs)
	documented := map[string]map[string]bool{}
	for _, m := range mentions {
		ok := m.name == "h" || m.name == "help"
		for _, c := range m.cmds {
			ok = ok || slices.Contains(sets[c], m.name)
			if documented[c] == nil {
				documented[c] = map[string]bool{}
			}
			documented[c][m.name] = true
		}
		if m.strict && !ok {
			out = append(out, docProblem{m.file, m.line, fmt.Sprintf("%s is not a flag of tally %s", m.written, strings.Join(m.cmds, " or tally "))})
		}
	}
	cmds := make([]string, 0, len(sets))
	for c := range sets {
		cmds = append(cmds, c)
	}
	sort.Strings(cmds)
	for _, c := range cmds {
		for _, f := range sets[c] {
			if f != "h" && f != "help" && !documented[c][f] {
				dashes := "--"
				if len(f) == 1 {
					dashes = "-"
				}
				out = append(out, docProblem{allDocs, 0, fmt.Sprintf("%s%s, a flag of tally %s (tally %s --help), is documented nowhere: name it in a `tally %s` command, or on a line, in a table or a section that names `tally %s`", dashes, f, c, c, c, c)})
			}
		}
	}
	return sortProblems(out)
}

// helpFlags are the flags `tally cmd --help` prints.
func helpFlags(t *testing.T, cmd string) []string {
	t.Helper()
	var stdout, stderr strings.Builder
	if code := run([]string{cmd, "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("tally %s --help: exit %d, stderr %q", cmd, code, stderr.String())
	}
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^  -([A-Za-z0-9][^\s=]*)`).FindAllStringSubmatch(stderr.String(), -1) {
		flags = append(flags, m[1])
	}
	if len(flags) == 0 {
		t.Fatalf("tally %s --help lists no flags: %q", cmd, stderr.String())
	}
	return flags
}

// ---- Metrics.

var metricWordRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_]_?)(tally_[a-z0-9_]+)(\*?)`)

// badMetrics checks the tally_ words of docs against registered (a
// metric's name: whether it is a histogram), workqueues (the ledger's
// workqueue names, label values of controller-runtime's workqueue_*
// metrics), and that docs name every registered metric.
func badMetrics(docs map[string]string, registered map[string]bool, workqueues []string) []docProblem {
	var out []docProblem
	named := map[string]bool{}
	for _, d := range parseDocs(docs) {
		for i, l := range d.lines {
			for _, m := range metricWordRE.FindAllStringSubmatch(l, -1) {
				w := m[1]
				if m[2] == "*" {
					ok := false
					for r := range registered {
						ok = ok || strings.HasPrefix(r, w)
					}
					if !ok {
						out = append(out, docProblem{d.name, i + 1, fmt.Sprintf("%s*: tally registers no metric named so", w)})
					}
					continue
				}
				w = strings.TrimRight(w, "_")
				if w == "tally" {
					continue
				}
				if _, ok := registered[w]; ok {
					named[w] = true
					continue
				}
				base := ""
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(w, suffix); ok && registered[b] {
						base = b
					}
				}
				switch {
				case base != "":
					named[base] = true
				case slices.Contains(workqueues, w):
				default:
					out = append(out, docProblem{d.name, i + 1, fmt.Sprintf("%s is not a metric tally registers", w)})
				}
			}
		}
	}
	for _, r := range slices.Sorted(maps.Keys(registered)) {
		if !named[r] {
			out = append(out, docProblem{allDocs, 0, fmt.Sprintf("metric %s, which tally registers, is documented nowhere", r)})
		}
	}
	return sortProblems(out)
}

// recordingRegisterer records the names of the metrics registered with
// it, and whether each is a histogram.
type recordingRegisterer struct {
	names map[string]bool
	err   error
}

var fqNameRE = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	hist := false
	switch c.(type) {
	case prometheus.Histogram, *prometheus.HistogramVec:
		hist = true
	}
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for desc := range ch {
		m := fqNameRE.FindStringSubmatch(desc.String())
		if m == nil {
			r.err = errors.Join(r.err, fmt.Errorf("no fqName in the description %s", desc))
			continue
		}
		r.names[m[1]] = hist
	}
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *recordingRegisterer) Unregister(prometheus.Collector) bool { return false }

// servedMetrics are the metrics tally serve registers (as ledger.Setup
// does: the ledger's and the Event queue's), and the names of the
// ledger's workqueues, as controller-runtime's registry labels their
// workqueue_* series.
func servedMetrics(t *testing.T) (registered map[string]bool, workqueues []string) {
	t.Helper()
	rec := &recordingRegisterer{names: map[string]bool{}}
	ledger.New(nil, nil, nil, nil, logr.Discard(), ledger.Options{Registry: rec})
	ledger.NewEventQueue(nil, nil, "tally", rec, logr.Discard())
	if rec.err != nil {
		t.Fatal(rec.err)
	}
	for _, n := range metrics.Names() {
		if _, ok := rec.names[n]; !ok {
			t.Errorf("metrics.Names lists %s, which ledger.New did not register", n)
		}
	}
	for n := range rec.names {
		if !strings.HasPrefix(n, "tally_") {
			t.Errorf("tally registers %s, whose name does not start with tally_ (the docs check finds metrics by that prefix)", n)
		}
	}
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "workqueue_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && strings.HasPrefix(l.GetValue(), "tally_") && !slices.Contains(workqueues, l.GetValue()) {
					workqueues = append(workqueues, l.GetValue())
				}
			}
		}
	}
	if len(workqueues) == 0 {
		t.Error("controller-runtime's registry has no workqueue_* series named tally_*: are the ledger's workqueues still named, and their metrics still exported?")
	}
	sort.Strings(workqueues)
	return rec.names, workqueues
}

// ---- The real documents.

func loadDocs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, f := range append([]string{"README.md"}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[filepath.ToSlash(f)] = string(b)
	}
	return docs
}

func diskExists(p string) bool {
	_, err := os.Stat(filepath.FromSlash(p))
	return err == nil
}

func diskRead(p string) (string, bool) {
	b, err := os.ReadFile(filepath.FromSlash(p))
	return string(b), err == nil
}

// TestDocs runs every check over README.md and docs/*.md.
func TestDocs(t *testing.T) {
	docs := loadDocs(t)
	report := func(t *testing.T, ps []docProblem) {
		for _, p := range ps {
			t.Error(p)
		}
	}
	t.Run("links", func(t *testing.T) {
		report(t, brokenLinks(docs, diskExists, diskRead))
	})
	t.Run("make targets", func(t *testing.T) {
		makefile, err := os.ReadFile("Makefile")
		if err != nil {
			t.Fatal(err)
		}
		report(t, unknownMakeTargets(docs, makeTargets(string(makefile))))
	})
	t.Run("flags", func(t *testing.T) {
		sets := map[string][]string{}
		for _, c := range []string{"serve", "status", "explain", "check-config"} {
			sets[c] = helpFlags(t, c)
		}
		report(t, badFlags(docs, sets))
	})
	t.Run("metrics", func(t *testing.T) {
		registered, workqueues := servedMetrics(t)
		report(t, badMetrics(docs, registered, workqueues))
	})
}

// ---- The checks on fake documents.

func problemStrings(ps []docProblem) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

func checkProblems(t *testing.T, got []docProblem, want []string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if g := problemStrings(got); !slices.Equal(g, want) {
		t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(g, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestDocsLinkCheck(t *testing.T) {
	other := "# Other\n\n## Sub section\n\n## Notes\n\n## Notes\n\n```\n# In code\n```\n\n<a id=\"custom\"></a>\n"
	files := map[string]bool{"docs/other.md": true, "docs/pic.png": true, "bench": true, "bench/x.yaml": true, "e2e/README.md": true}
	exists := func(p string) bool { return files[p] }
	read := func(p string) (string, bool) {
		if p == "e2e/README.md" {
			return "# E2E\n\n## Running it\n", true
		}
		return "", false
	}
	for _, tc := range []struct {
		name string
		doc  string
		want []string
	}{
		{"good links", "# Top\n\n## The `tally_x` metric: why?\n\n### Fewer writes: the switches of `tally serve`\n\n" +
			"See [other](docs/other.md), [sub](docs/other.md#sub-section), [notes](docs/other.md#notes-1),\n" +
			"[custom](docs/other.md#custom), [dir](bench/) and [file](./bench/x.yaml \"title\"),\n" +
			"![pic](docs/pic.png), [e2e](e2e/README.md#running-it), [top](#top), [m](#the-tally_x-metric-why),\n" +
			"[switches](#fewer-writes-the-switches-of-tally-serve), [root](/bench/x.yaml), [web](https://example.com/x.md#nope),\n" +
			"[mail](mailto:a@b.c), a link across\n[two lines](docs/other.md#other) and <a href=\"docs/other.md#notes\">html</a>.\n\n" +
			"[ref]: docs/other.md#sub-section\n\n" +
			"```\n[not a link](nope.md)\n```\n\nand `[not a link](nope.md)` either.\n", nil},
		{"missing file", "# T\n\ntext\n[a](docs/nope.md)\n", []string{`README.md:4: link "docs/nope.md": docs/nope.md does not exist`}},
		{"missing file, relative", "# T\n\n[a](other.md)\n", []string{`README.md:3: link "other.md": other.md does not exist`}},
		{"missing anchor", "# T\n\n[a](docs/other.md#nope)\n", []string{`README.md:3: link "docs/other.md#nope": no heading or anchor "nope" in docs/other.md`}},
		{"missing anchor in this file", "# T\n\n[a](#t) [b](#nope)\n", []string{`README.md:3: link "#nope": no heading or anchor "nope" in README.md`}},
		{"heading in a code block", "# T\n\n[a](docs/other.md#in-code)\n", []string{`README.md:3: link "docs/other.md#in-code": no heading or anchor "in-code" in docs/other.md`}},
		{"third duplicate", "# T\n\n[a](docs/other.md#notes-2)\n", []string{`README.md:3: link "docs/other.md#notes-2": no heading or anchor "notes-2" in docs/other.md`}},
		{"case matters", "# T\n\n[a](docs/other.md#Sub-section)\n", []string{`README.md:3: link "docs/other.md#Sub-section": no heading or anchor "Sub-section" in docs/other.md`}},
		{"reference definition", "# T\n\n[x][r]\n\n[r]: nope/\n", []string{`README.md:5: link "nope/": nope does not exist`}},
		{"html", "# T\n\n<img src=\"docs/nope.png\">\n", []string{`README.md:3: link "docs/nope.png": docs/nope.png does not exist`}},
		{"anchor of a file outside the docs", "# T\n\n[x](e2e/README.md#nope)\n", []string{`README.md:3: link "e2e/README.md#nope": no heading or anchor "nope" in e2e/README.md`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkProblems(t, brokenLinks(map[string]string{"README.md": tc.doc, "docs/other.md": other}, exists, read), tc.want)
		})
	}
	// A link from docs/ resolves against docs/.
	checkProblems(t, brokenLinks(map[string]string{"docs/a.md": "# A\n\n[o](other.md#notes) [r](../README.md#t) [bad](../nope.md)\n",
		"README.md": "# T\n", "docs/other.md": other}, func(p string) bool { return files[p] || p == "README.md" }, read),
		[]string{`docs/a.md:3: link "../nope.md": nope.md does not exist`})
}

func TestDocsSlugs(t *testing.T) {
	for in, want := range map[string]string{
		"The pod gate (`BenchmarkPodGate`)":                  "the-pod-gate-benchmarkpodgate",
		"Where tally chooses (Kueue is silent or different)": "where-tally-chooses-kueue-is-silent-or-different",
		"Configuration: Kueue's":                             "configuration-kueues",
		"With an autoscaler: `make demo KARPENTER=1`":        "with-an-autoscaler-make-demo-karpenter1",
		"**Bold** and _em_ and `a_b`":                        "bold-and-em-and-a_b",
		"[A link](x.md) &amp; more":                          "a-link--more",
		"Ünïcode café":                                       "ünïcode-café",
	} {
		if got := slugify(plainHeading(in)); got != want {
			t.Errorf("slug of %q: %q, want %q", in, got, want)
		}
	}
}

func TestDocsMakeCheck(t *testing.T) {
	targets := makeTargets(".PHONY: demo bench\ndemo: build ## d\nbench: toolchain\n\t$(GO) run x: y\nVAR := a:b\nX = c:d\nbuild:\n" +
		"FUZZ ?= $(shell grep \\\n\tfoo: bar)\ntest-unit: ## t\n")
	for _, tc := range []struct {
		name string
		doc  string
		want []string
	}{
		{"known targets", "Run `make demo KARPENTER=1` or `make bench BENCH_SCENARIO=x BENCH_FLAGS='-a -b'`, `make -j 4 build`,\n" +
			"Kueue's `make run-performance-scheduler` and `make -C ../kueue test-e2e`, `make --file=x.mk y`;\n" +
			"`FOO=1 make test-unit`, `make demo && make bench`, and a tally started by make demo, as said.\n\n" +
			"```\n$ make build \\\n    VAR=1 bench   # then make sure it works\nkubectl get jobs --namespace x\ngo test -run X ./...\nx := make([]int, 3)\n```\n\n" +
			"To make sure, make a tree; with Go, make and git. We make it so.\n", nil},
		{"unknown in a code span", "Run `make deploy`.\n", []string{`README.md:1: make deploy: the Makefile has no target "deploy"`}},
		{"tally's own", "tally's `make deploy`.\n", []string{`README.md:1: make deploy: the Makefile has no target "deploy"`}},
		{"unknown after VAR=value", "`make demo KARPENTER=1 lint`\n", []string{`README.md:1: make lint: the Makefile has no target "lint"`}},
		{"unknown in a code block", "# T\n\n```\nmake build lint\n```\n", []string{`README.md:4: make lint: the Makefile has no target "lint"`}},
		{"unknown after &&", "```\ncd x && make nope | tee log\n```\n", []string{`README.md:2: make nope: the Makefile has no target "nope"`}},
		{"unknown in prose", "a\nthen run make nothing.\n", []string{`README.md:2: make nothing: the Makefile has no target "nothing"`}},
		{"unknown in a span across lines", "see `make\nbench-huge`\n", []string{`README.md:1: make bench-huge: the Makefile has no target "bench-huge"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkProblems(t, unknownMakeTargets(map[string]string{"README.md": tc.doc}, targets), tc.want)
		})
	}
	if want := []string{"bench", "build", "demo", "test-unit"}; !slices.Equal(slices.Sorted(maps.Keys(targets)), append([]string{".PHONY"}, want...)) {
		t.Errorf("targets %v, want .PHONY and %v", slices.Sorted(maps.Keys(targets)), want)
	}
}

func TestDocsFlagCheck(t *testing.T) {
	sets := map[string][]string{
		"serve":        {"config", "leader-elect", "metrics-bind-address", "zap-devel"},
		"status":       {"kubeconfig", "namespace", "config"},
		"explain":      {"n", "o", "config"},
		"check-config": nil, // here: a command with no flags
	}
	base := "Run `tally serve --config c --leader-elect --metrics-bind-address=:8080 --zap-devel`,\n" +
		"`bin/tally status --kubeconfig k --namespace n --config c` and `tally explain -n ns -o json --config c job`.\n"
	for _, tc := range []struct {
		name string
		doc  string
		want []string
	}{
		{"all documented, others' flags ignored", base +
			"\n```\nkubectl -n tally-system get jobs --namespace x --all-namespaces\nhelm install tally deploy/helm/tally --set a=b --create-namespace\n" +
			"go test -run X -count=1\nmake bench BENCH_FLAGS='-tally-arg=--finished-label=off'\nkubectl logs deploy/tally --tail=10\n" +
			"tally serve [flags]     run the webhooks (also: tally --flag ...)\ntally explain [flags] NAME | -f FILE\n" +
			"kube-apiserver --max-requests-inflight=5000\n```\n\n" +
			"kube-apiserver with `--max-requests-inflight=5000` and --watch-cache, and `tally COMMAND --help`,\n" +
			"`kubectl --kubeconfig x`, `go test -run TestX`, `--set-file config=x`.\n", nil},
		{"unknown flag in a command", base + "```\n$ tally serve --config x \\\n    --bogus\n```\n",
			[]string{"README.md:4: --bogus is not a flag of tally serve"}},
		{"unknown flag of implicit serve", base + "`tally --config x --nope`\n",
			[]string{"README.md:3: --nope is not a flag of tally serve"}},
		{"unknown flag of status", base + "```\nbin/tally status --kubeconfig k -o wide\n```\n",
			[]string{"README.md:4: -o is not a flag of tally status"}},
		{"unknown flag on a line naming tally serve", base + "With `tally serve`, `--leader-elect` and --bogus-mode matter.\n",
			[]string{"README.md:3: --bogus-mode is not a flag of tally serve"}},
		{"a line naming two commands", base + "`tally status` and `tally serve` take `--kubeconfig`, `--zap-devel`, `--nope`.\n",
			[]string{"README.md:3: --nope is not a flag of tally serve or tally status"}},
		{"unknown flag in a table introduced by tally serve --help", base + "\n`tally serve --help` lists\nthe flags:\n\n| flag | meaning |\n|---|---|\n| `--config FILE` | c |\n| `--made-up`, `--leader-elect` | x |\n",
			[]string{"README.md:10: --made-up is not a flag of tally serve"}},
		{"unknown flag in a section on tally serve", base + "\n## The switches of `tally serve`\n\n| flag | values |\n|---|---|\n| `--nope` | a |\n\nWith `--zap-devel`, `-l x=y` lists (kubectl's); --wrong too.\n\n### Sub\n\n`--deeper`\n\n## Other\n\n`--not-checked`\n",
			[]string{"README.md:8: --nope is not a flag of tally serve", "README.md:10: --wrong is not a flag of tally serve", "README.md:14: --deeper is not a flag of tally serve"}},
		{"section named as the command", base + "\n## explain\n\n`--config FILE` and `--nope`; `-o json`.\n",
			[]string{"README.md:6: --nope is not a flag of tally explain"}},
		{"another's flag on a serve line", base + "`tally serve` sends the API server's `--max-requests-inflight`; tally serve's `--nope` fails.\n",
			[]string{"README.md:3: --nope is not a flag of tally serve"}},
		{"a table row naming tally serve", base + "\n| flag | meaning |\n|---|---|\n| `--tally-arg=ARG` | Passes an argument to `tally serve`. |\n",
			nil},
		{"a table after a paragraph naming tally serve, not of its flags", "\n`tally serve` is benchmarked with:\n\n| flag | meaning |\n|---|---|\n| `--tally-arg=ARG` | x |\n" + base,
			nil},
		{"a table with tally serve in its header", "| `tally serve` flag | meaning |\n|---|---|\n| `--nope` | x |\n\n" + base,
			[]string{"README.md:3: --nope is not a flag of tally serve"}},
		{"a table of tally serve's options", "\nThe options of `tally serve`:\n\n| flag | meaning |\n|---|---|\n| `--nope` | x |\n\n" + base,
			[]string{"README.md:6: --nope is not a flag of tally serve"}},
		{"a flag check-config does not have", base + "`tally check-config --strict a.yaml`\n",
			[]string{"README.md:3: --strict is not a flag of tally check-config"}},
		{"undocumented flags", "`tally serve --config c --leader-elect`\n\n`tally status --kubeconfig k --config c` (`kubectl --namespace x`, `tally explain -n x --config c`)\n",
			[]string{
				allDocs + ": -o, a flag of tally explain (tally explain --help), is documented nowhere: name it in a `tally explain` command, or on a line, in a table or a section that names `tally explain`",
				allDocs + ": --metrics-bind-address, a flag of tally serve (tally serve --help), is documented nowhere: name it in a `tally serve` command, or on a line, in a table or a section that names `tally serve`",
				allDocs + ": --zap-devel, a flag of tally serve (tally serve --help), is documented nowhere: name it in a `tally serve` command, or on a line, in a table or a section that names `tally serve`",
				allDocs + ": --namespace, a flag of tally status (tally status --help), is documented nowhere: name it in a `tally status` command, or on a line, in a table or a section that names `tally status`",
			}},
		{"documented by a single-dash mention in context", "`tally serve --config c --leader-elect --metrics-bind-address :1 -zap-devel`\n\n`tally status --kubeconfig k --namespace n --config c`\n\n### tally explain\n\n`-n NS`, `-o json` and `--config`.\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkProblems(t, badFlags(map[string]string{"README.md": tc.doc}, sets), tc.want)
		})
	}
}

func TestDocsMetricCheck(t *testing.T) {
	registered := map[string]bool{"tally_admitted_total": false, "tally_wait_seconds": true}
	workqueues := []string{"tally_job_labels"}
	all := "| `tally_admitted_total` | counter |\n| `tally_wait_seconds` | histogram |\n"
	for _, tc := range []struct {
		name string
		doc  string
		want []string
	}{
		{"all documented", all + "\n```\nrate(tally_wait_seconds_bucket[5m]) / tally_wait_seconds_count, tally_wait_seconds_sum\n" +
			"workqueue_depth{name=\"tally_job_labels\"}\n```\n\nThe `tally_wait_*` family; TALLY_BIN, e2e_tally_x, _tally_admitted_total_.\n", nil},
		{"unregistered", all + "and `tally_nope_total`\n", []string{"README.md:3: tally_nope_total is not a metric tally registers"}},
		{"suffix of a counter", all + "tally_admitted_total_count\n", []string{"README.md:3: tally_admitted_total_count is not a metric tally registers"}},
		{"unknown family", all + "the `tally_local_queue_*` metrics\n", []string{"README.md:3: tally_local_queue_*: tally registers no metric named so"}},
		{"undocumented", "| `tally_wait_seconds_sum` |\n", []string{allDocs + ": metric tally_admitted_total, which tally registers, is documented nowhere"}},
		{"a queue name does not document a metric", "`tally_job_labels`\n", []string{
			allDocs + ": metric tally_admitted_total, which tally registers, is documented nowhere",
			allDocs + ": metric tally_wait_seconds, which tally registers, is documented nowhere"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkProblems(t, badMetrics(map[string]string{"README.md": tc.doc}, registered, workqueues), tc.want)
		})
	}
}
