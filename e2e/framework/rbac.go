package framework

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServiceAccountName is the service account deploy/base/rbac.yaml binds.
const ServiceAccountName = "tally"

// InstallRBAC applies the manifests of an RBAC file (deploy/base/rbac.yaml)
// as they are, so tally runs with exactly the permissions it ships with.
func InstallRBAC(ctx context.Context, c client.Client, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// PrepareWebhookConfigurations creates tally's two webhook configurations
// empty, as an installation with deploy/ does: tally may only update them.
func PrepareWebhookConfigurations(ctx context.Context, c client.Client, name string) error {
	for _, obj := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}},
	} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// ServiceAccountKubeconfig writes, next to adminKubeconfig, a kubeconfig
// that authenticates as service account ns/name with a fresh token.
func ServiceAccountKubeconfig(ctx context.Context, c client.Client, adminKubeconfig, ns, name string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", ns, name, err)
	}
	cfg, err := clientcmd.LoadFromFile(adminKubeconfig)
	if err != nil {
		return "", err
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil {
		return "", fmt.Errorf("%s: no current context", adminKubeconfig)
	}
	user := "sa-" + name
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{user: {Token: tr.Status.Token}}
	kctx.AuthInfo = user
	path := filepath.Join(filepath.Dir(adminKubeconfig), "kubeconfig-"+name)
	return path, clientcmd.WriteToFile(*cfg, path)
}

// Forbidden returns the lines of a log that report a request the API
// server refused for lack of permission.
func Forbidden(logPath string) ([]string, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, "is forbidden") {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}
