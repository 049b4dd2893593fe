package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The image's contract, as the Dockerfile and deploy/base/deployment.yaml
// state it.
var (
	wantEntrypoint = []string{"/tally"}
	wantCmd        = []string{"serve"}
	wantUser       = "65532:65532"
)

const (
	mediaTypeManifest  = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig    = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer     = "application/vnd.oci.image.layer.v1.tar"
	mediaTypeLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip"
	annotationRefName  = "org.opencontainers.image.ref.name"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string   `json:"User"`
		Env        []string `json:"Env"`
		Entrypoint []string `json:"Entrypoint"`
		Cmd        []string `json:"Cmd"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// layout is an OCI image layout read from an archive: its files by path.
type layout map[string][]byte

func readLayout(t *testing.T, archive string) layout {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := layout{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %s: %v", archive, hdr.Name, err)
		}
		l[path.Clean(strings.TrimPrefix(hdr.Name, "./"))] = data
	}
	return l
}

// blob returns the blob d names, checked against its size and digest.
func (l layout) blob(t *testing.T, d descriptor) []byte {
	t.Helper()
	alg, hexDigest, ok := strings.Cut(d.Digest, ":")
	if !ok || alg != "sha256" {
		t.Fatalf("digest %q: want sha256:<hex>", d.Digest)
	}
	data, ok := l["blobs/sha256/"+hexDigest]
	if !ok {
		t.Fatalf("blob %s (%s) is not in the archive", d.Digest, d.MediaType)
	}
	if int64(len(data)) != d.Size {
		t.Fatalf("blob %s: %d bytes, its descriptor says %d", d.Digest, len(data), d.Size)
	}
	if got := sha256Hex(data); got != hexDigest {
		t.Fatalf("blob %s: content digest is sha256:%s", d.Digest, got)
	}
	return data
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func unmarshal(t *testing.T, what string, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestImage checks the OCI archive TALLY_IMAGE names (bin/tally-image.tar,
// written by make image) and runs its binary.
func TestImage(t *testing.T) {
	archive := os.Getenv("TALLY_IMAGE")
	if archive == "" {
		t.Skip("TALLY_IMAGE is not set: run make image-test, or set it to the OCI archive make image writes")
	}
	l := readLayout(t, archive)

	var lay struct {
		Version string `json:"imageLayoutVersion"`
	}
	unmarshal(t, "oci-layout", l["oci-layout"], &lay)
	if lay.Version != "1.0.0" {
		t.Fatalf("oci-layout: imageLayoutVersion %q, want 1.0.0 (is %s an OCI archive?)", lay.Version, archive)
	}
	var idx index
	unmarshal(t, "index.json", l["index.json"], &idx)
	if len(idx.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want 1", len(idx.Manifests))
	}
	md := idx.Manifests[0]
	if md.MediaType != mediaTypeManifest {
		t.Fatalf("index.json: manifest media type %q, want %q", md.MediaType, mediaTypeManifest)
	}
	ref := md.Annotations[annotationRefName]
	t.Logf("image %s, manifest %s", ref, md.Digest)
	if want := os.Getenv("TALLY_IMAGE_REF"); want != "" && ref != want {
		t.Errorf("index.json: %s is %q, want %q", annotationRefName, ref, want)
	} else if ref == "" {
		t.Errorf("index.json: the manifest has no %s: loaded, the image would have no name", annotationRefName)
	}

	var m manifest
	unmarshal(t, "manifest", l.blob(t, md), &m)
	if m.Config.MediaType != mediaTypeConfig {
		t.Fatalf("manifest: config media type %q, want %q", m.Config.MediaType, mediaTypeConfig)
	}
	var cfg imageConfig
	unmarshal(t, "config", l.blob(t, m.Config), &cfg)

	t.Run("Config", func(t *testing.T) {
		if cfg.OS != "linux" {
			t.Errorf("os %q, want linux", cfg.OS)
		}
		if cfg.Architecture == "" {
			t.Errorf("no architecture")
		}
		if !reflect.DeepEqual(cfg.Config.Entrypoint, wantEntrypoint) {
			t.Errorf("Entrypoint %q, want %q", cfg.Config.Entrypoint, wantEntrypoint)
		}
		if !reflect.DeepEqual(cfg.Config.Cmd, wantCmd) {
			t.Errorf("Cmd %q, want %q", cfg.Config.Cmd, wantCmd)
		}
		if cfg.Config.User != wantUser {
			t.Errorf("User %q, want %q", cfg.Config.User, wantUser)
		}
		if uid, gid, err := numericUser(cfg.Config.User); err != nil {
			t.Errorf("User: %v", err)
		} else if uid == 0 || gid == 0 {
			t.Errorf("User %q is root or in group root", cfg.Config.User)
		}
	})

	// The single layer, uncompressed.
	if len(m.Layers) != 1 {
		t.Fatalf("manifest: %d layers, want 1 (the binary)", len(m.Layers))
	}
	layer := l.blob(t, m.Layers[0])
	switch m.Layers[0].MediaType {
	case mediaTypeLayerGzip:
		zr, err := gzip.NewReader(bytes.NewReader(layer))
		if err != nil {
			t.Fatalf("layer: %v", err)
		}
		if layer, err = io.ReadAll(zr); err != nil {
			t.Fatalf("layer: %v", err)
		}
	case mediaTypeLayer:
	default:
		t.Fatalf("layer media type %q, want %q or %q", m.Layers[0].MediaType, mediaTypeLayerGzip, mediaTypeLayer)
	}
	if want := []string{"sha256:" + sha256Hex(layer)}; !reflect.DeepEqual(cfg.RootFS.DiffIDs, want) {
		t.Fatalf("config: rootfs.diff_ids %q, want %q (the layer's uncompressed digest)", cfg.RootFS.DiffIDs, want)
	}

	// The layer holds /tally alone: a root-owned executable, so that the
	// user the image runs as cannot replace it.
	var bin []byte
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("layer: %v", err)
		}
		name := "/" + path.Clean(strings.TrimPrefix(strings.TrimPrefix(hdr.Name, "./"), "/"))
		if name != "/tally" || hdr.Typeflag != tar.TypeReg {
			t.Errorf("layer: unexpected entry %s (type %q): the image should hold /tally alone", name, hdr.Typeflag)
			continue
		}
		if hdr.Mode&0o7777 != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("layer: /tally has mode %o and owner %d:%d, want 755 and 0:0", hdr.Mode&0o7777, hdr.Uid, hdr.Gid)
		}
		if bin, err = io.ReadAll(tr); err != nil {
			t.Fatalf("layer: /tally: %v", err)
		}
	}
	if bin == nil {
		t.Fatal("layer: no /tally")
	}

	t.Run("StaticBinary", func(t *testing.T) {
		checkBinary(t, bin, cfg.Architecture)
	})

	t.Run("Run", func(t *testing.T) {
		if cfg.OS != runtime.GOOS || cfg.Architecture != runtime.GOARCH {
			t.Skipf("the image is for %s/%s, this host is %s/%s", cfg.OS, cfg.Architecture, runtime.GOOS, runtime.GOARCH)
		}
		c := unpack(t, bin, cfg)
		t.Logf("running the entrypoint %s", c.how)

		// serve --help prints serve's flags and exits 0; --help and help
		// list the commands.
		out, err := c.run(t, "serve", "--help")
		if err != nil || !strings.Contains(out, "Usage: tally serve [flags]") || !strings.Contains(out, "-leader-elect") {
			t.Errorf("tally serve --help: %v, output:\n%s", err, out)
		}
		for _, args := range [][]string{{"help"}, {"--help"}} {
			out, err = c.run(t, args...)
			if err != nil || !strings.Contains(out, "tally serve [flags]") {
				t.Errorf("tally %s: %v, output:\n%s", args[0], err, out)
			}
		}
		out, err = c.run(t, "version")
		if err != nil || !strings.Contains(out, "(commit ") {
			t.Errorf("tally version: %v, output:\n%s", err, out)
		}

		// check-config reads a file as the image's user.
		queues, err := os.ReadFile("../../examples/demo/queues.yaml")
		if err != nil {
			t.Fatal(err)
		}
		c.writeFile(t, "queues.yaml", queues)
		out, err = c.run(t, "check-config", c.path("queues.yaml"))
		if err != nil || !strings.HasPrefix(out, "ok: ") {
			t.Errorf("tally check-config: %v, output:\n%s", err, out)
		}

		// status with $KUBECONFIG reaches for the API server it names.
		// With no /etc/passwd and no cgo, the client needs HOME to look
		// for a kubeconfig; without it, it fails before dialling with
		// "could not get current user" (the Dockerfile sets HOME=/).
		c.writeFile(t, "kubeconfig", []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`))
		out, err = c.runEnv(t, []string{"KUBECONFIG=" + c.path("kubeconfig")}, "status")
		var exit *exec.ExitError
		if !errors.As(err, &exit) || !strings.Contains(out, "127.0.0.1:1") || strings.Contains(out, "current user") {
			t.Errorf("tally status against https://127.0.0.1:1: %v (want an exit status and an error naming the server), output:\n%s", err, out)
		}
	})
}

// numericUser parses a config's User as uid:gid, both numbers: a scratch
// image has no /etc/passwd to look names up in, and runAsNonRoot can only
// check a numeric user.
func numericUser(user string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(user, ":")
	if !ok {
		return 0, 0, fmt.Errorf("%q has no group: want uid:gid", user)
	}
	if uid, err = strconv.Atoi(u); err != nil {
		return 0, 0, fmt.Errorf("%q: the user is not numeric", user)
	}
	if gid, err = strconv.Atoi(g); err != nil {
		return 0, 0, fmt.Errorf("%q: the group is not numeric", user)
	}
	return uid, gid, nil
}

var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// checkBinary checks that bin is a static, stripped Go executable for
// arch, built with CGO_ENABLED=0 and -trimpath.
func checkBinary(t *testing.T, bin []byte, arch string) {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("/tally is not an ELF file: %v", err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC {
		t.Errorf("/tally: ELF type %v, want %v (a static executable, not PIE)", f.Type, elf.ET_EXEC)
	}
	if want, ok := elfMachines[arch]; ok && f.Machine != want {
		t.Errorf("/tally: ELF machine %v, the image's architecture %s wants %v", f.Machine, arch, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("/tally has a %v program header: it is dynamically linked, and scratch has no loader", p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil {
		t.Errorf("/tally: imported libraries: %v", err)
	} else if len(libs) > 0 {
		t.Errorf("/tally needs shared libraries %q", libs)
	}
	for _, s := range f.Sections {
		if s.Name == ".symtab" || strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			t.Errorf("/tally has a %s section: not built with -ldflags \"-s -w\"", s.Name)
		}
	}

	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("/tally: Go build info: %v", err)
	}
	if info.Path != "tally.dev/tally" {
		t.Errorf("/tally is %q, want tally.dev/tally", info.Path)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, want := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": "linux", "GOARCH": arch} {
		if settings[k] != want {
			t.Errorf("/tally was built with %s=%q, want %q", k, settings[k], want)
		}
	}
	t.Logf("/tally: %d bytes, %s, vcs.revision %s, vcs.modified %s", len(bin), info.GoVersion, settings["vcs.revision"], settings["vcs.modified"])
}

// container runs the image's entrypoint from its unpacked layer.
type container struct {
	root  string // the unpacked layer
	entry string // the entrypoint's path as the command is given it
	env   []string
	attr  *syscall.SysProcAttr
	how   string
}

// unpack writes the binary to a new root and says how to run it: as root,
// inside a chroot of that root as the image's user, with the image's
// environment alone, as a container runs it (no /etc, no /proc); as
// another user, the binary directly as that user, still with the image's
// environment alone.
func unpack(t *testing.T, bin []byte, cfg imageConfig) *container {
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	entry := cfg.Config.Entrypoint[0]
	if err := os.WriteFile(filepath.Join(root, entry), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &container{root: root, env: cfg.Config.Env}
	if os.Geteuid() != 0 {
		c.entry = filepath.Join(root, entry)
		c.how = fmt.Sprintf("as uid %d, not in a chroot (not root)", os.Geteuid())
		return c
	}
	uid, gid, err := numericUser(cfg.Config.User)
	if err != nil {
		t.Fatal(err)
	}
	c.entry = entry
	c.attr = &syscall.SysProcAttr{
		Chroot:     root,
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true},
	}
	c.how = fmt.Sprintf("in a chroot of the layer as %s", cfg.Config.User)
	return c
}

// path is name's path as the entrypoint sees it.
func (c *container) path(name string) string {
	if c.attr != nil {
		return "/" + name
	}
	return filepath.Join(c.root, name)
}

func (c *container) writeFile(t *testing.T, name string, data []byte) {
	if err := os.WriteFile(filepath.Join(c.root, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs the entrypoint with args and the image's environment, and
// returns its output, stdout then stderr.
func (c *container) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return c.runEnv(t, nil, args...)
}

// runEnv is run with env added to the image's environment.
func (c *container) runEnv(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.entry, args...)
	cmd.Env = append(append([]string(nil), c.env...), env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = c.attr
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String() + stderr.String(), err
}
