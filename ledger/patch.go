package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// versionPatches is the ledger's write client: its patches of a
// workload's metadata (a metav1.PartialObjectMetadata, as kinds.Ref makes
// for every admission, eviction and label write) read back from the API
// server's answer only the resourceVersion, the one field the ledger
// uses. The admission storm is tens of thousands of such writes, and
// decoding each answer's whole metadata (its labels, annotations and
// managedFields) cost more than sending it. The request is the one
// client-go's metadata client makes, through the same REST client
// machinery (rate limiter, retries, metrics). Every other call is the
// embedded client's.
type versionPatches struct {
	client.Client
	rest   rest.Interface
	mapper meta.RESTMapper
}

// metadataAccept asks for the answer as PartialObjectMetadata, in
// protobuf where the server can, as client-go's metadata client does.
const metadataAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
	"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// newVersionPatches wraps cl, whose config cfg (its rate limiter
// included) and HTTP client h the patches share.
func newVersionPatches(cl client.Client, cfg *rest.Config, h *http.Client, mapper meta.RESTMapper) (client.Client, error) {
	c := metadata.ConfigFor(cfg)
	// The REST client wants a group version to serialize options with;
	// every path is absolute.
	c.GroupVersion = &schema.GroupVersion{}
	c.APIPath = "/"
	rc, err := rest.RESTClientForConfigAndClient(c, h)
	if err != nil {
		return nil, err
	}
	return versionPatches{Client: cl, rest: rc, mapper: mapper}, nil
}

// Patch sends patch. For a PartialObjectMetadata it sets only obj's
// resourceVersion from the answer, and leaves it empty when the answer
// has none it can read (the write was made all the same).
func (p versionPatches) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return p.Client.Patch(ctx, obj, patch, opts...)
	}
	gvk := m.GroupVersionKind()
	mapping, err := p.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	po := (&client.PatchOptions{}).ApplyOptions(opts).AsPatchOptions()
	res := p.rest.Patch(patch.Type()).AbsPath(pathOf(mapping.Resource, m.Namespace, m.Name)...).Body(data).
		SetHeader("Accept", metadataAccept).VersionedParams(po, metav1.ParameterCodec).Do(ctx)
	if err := res.Error(); err != nil {
		return err
	}
	var contentType string
	body, _ := res.ContentType(&contentType).Raw()
	rv, _ := resourceVersionOf(body, contentType)
	m.SetResourceVersion(rv)
	return nil
}

// pathOf is the path of object name of resource r in namespace ns ("" for
// a cluster-scoped one).
func pathOf(r schema.GroupVersionResource, ns, name string) []string {
	segments := make([]string, 0, 7)
	if r.Group == "" {
		segments = append(segments, "api")
	} else {
		segments = append(segments, "apis", r.Group)
	}
	segments = append(segments, r.Version)
	if ns != "" {
		segments = append(segments, "namespaces", ns)
	}
	return append(segments, r.Resource, name)
}

// protobufMagic starts every protobuf body of the API server (its
// runtime.Unknown envelope follows).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// resourceVersionOf reads metadata.resourceVersion of the object in an
// answer of content type contentType: protobuf (a runtime.Unknown whose
// raw bytes, field 2, hold the object, whose field 1 is its ObjectMeta,
// whose field 6 is the resourceVersion) or JSON.
func resourceVersionOf(body []byte, contentType string) (string, error) {
	if !strings.HasPrefix(contentType, runtime.ContentTypeProtobuf) {
		var v struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		err := json.Unmarshal(body, &v)
		return v.Metadata.ResourceVersion, err
	}
	b, ok := bytes.CutPrefix(body, protobufMagic)
	if !ok {
		return "", errors.New("a protobuf answer without its envelope")
	}
	for _, field := range []protowire.Number{2, 1, 6} {
		var err error
		if b, err = bytesField(b, field); err != nil {
			return "", err
		}
	}
	return string(b), nil
}

// bytesField returns the value of the first length-delimited field num
// of protobuf message b.
func bytesField(b []byte, num protowire.Number) ([]byte, error) {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return nil, protowire.ParseError(l)
			}
			return v, nil
		}
		if l = protowire.ConsumeFieldValue(n, typ, b); l < 0 {
			return nil, protowire.ParseError(l)
		}
		b = b[l:]
	}
	return nil, fmt.Errorf("no field %d", num)
}
