package framework

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// CertManager is cert-manager's controllers and cainjector, built from
// e2e/toolchain/cert-manager (cert-manager's own commands are modules the
// proxy does not serve) and run by e2e/cluster/cert-manager.sh.
const (
	CertManager       = "cert-manager"
	certManagerScript = "cert-manager.sh"
)

// InstallCertManagerCRDs builds cert-manager if needed, installs its CRDs
// and waits until they are served.
func (c *Cluster) InstallCertManagerCRDs(ctx context.Context) error {
	if err := c.Env.BuildTool(ctx, CertManager); err != nil {
		return err
	}
	return c.script(ctx, certManagerScript, "crds", c.Kubeconfig)
}

// NewCertManager builds cert-manager if needed and sets up one for
// cluster c that logs to dir/cert-manager.log.
func NewCertManager(ctx context.Context, c *Cluster, dir string) (*Operator, error) {
	if err := c.Env.BuildTool(ctx, CertManager); err != nil {
		return nil, err
	}
	o := newOperator(c, dir, "cert-manager", CertManager, certManagerScript)
	o.ReadyLog = "cert-manager started"
	return o, nil
}

// Kustomize renders a kustomization of the repository (such as
// deploy/cert-manager) with the toolchain's kubectl.
func (e Env) Kustomize(ctx context.Context, dir string) ([]*unstructured.Unstructured, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.Tools, "kubectl"), "kustomize", filepath.Join(e.Root, dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w\n%s", dir, err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err == io.EOF {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("kubectl kustomize %s: %w", dir, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// WriteSecretVolume writes data into dir as the kubelet updates a Secret
// volume: the files go into a new hidden directory, the symlink ..data is
// swapped to it in one rename, and each key is a symlink through ..data,
// so a reader never sees a mix of old and new files; the previous
// directory is then removed.
func WriteSecretVolume(dir string, data map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	ts, err := os.MkdirTemp(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(ts, k), v, 0o440); err != nil {
			return err
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for k := range data {
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				return err
			}
		}
	}
	if old != "" {
		return os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}
