package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/kinds"
)

// podJob renders a batch/v1 Job whose pod spec is pod.
func podJob(pod string) string {
	return `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"template":{"spec":` + pod + `}}}`
}

// container renders a pod spec of one container with members spliced in.
func container(members string) string {
	return `{"containers":[{"name":"c","image":"x"` + members + `}]}`
}

func TestHostileQuantity(t *testing.T) {
	const huge = "9223E7203685477580927"
	pod := "spec.template.spec."
	beyond := func(path, text string) string {
		return path + `: quantity "` + text + `" has a decimal exponent beyond ±30`
	}
	for _, tc := range []struct {
		name, raw string
		// want is the whole error, "" for none.
		want string
	}{
		{"a container request", podJob(container(`,"resources":{"requests":{"cpu":"` + huge + `"}}`)),
			beyond(pod+"containers[0].resources.requests[cpu]", huge)},
		{"a container limit", podJob(container(`,"resources":{"limits":{"memory":"1e-30000000"}}`)),
			beyond(pod+"containers[0].resources.limits[memory]", "1e-30000000")},
		{"the second of two requests", podJob(container(`,"resources":{"requests":{"cpu":"1","memory":"1E-2147483648"}}`)),
			beyond(pod+"containers[0].resources.requests[memory]", "1E-2147483648")},
		{"an init container", podJob(`{"initContainers":[{"name":"i"},{"name":"j","resources":{"requests":{"cpu":"9223e-3000000"}}}]}`),
			beyond(pod+"initContainers[1].resources.requests[cpu]", "9223e-3000000")},
		{"an ephemeral container", podJob(`{"ephemeralContainers":[{"name":"e","resources":{"limits":{"cpu":"1e31"}}}]}`),
			beyond(pod+"ephemeralContainers[0].resources.limits[cpu]", "1e31")},
		{"the pod overhead", podJob(`{"overhead":{"cpu":"1e-999999999"}}`), beyond(pod+"overhead[cpu]", "1e-999999999")},
		{"pod-level resources", podJob(`{"resources":{"requests":{"cpu":"1e99"}}}`), beyond(pod+"resources.requests[cpu]", "1e99")},
		{"an emptyDir size limit", podJob(`{"volumes":[{"name":"v","emptyDir":{"sizeLimit":"1e-99"}}]}`), beyond(pod+"volumes[0].emptyDir.sizeLimit", "1e-99")},
		{"an ephemeral volume claim", podJob(`{"volumes":[{"name":"v","ephemeral":{"volumeClaimTemplate":{"spec":{"resources":{"requests":{"storage":"1e40"}}}}}}]}`),
			beyond(pod+"volumes[0].ephemeral.volumeClaimTemplate.spec.resources.requests[storage]", "1e40")},
		{"an env divisor", podJob(container(`,"env":[{"name":"n","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"1e-40"}}}]`)),
			beyond(pod+"containers[0].env[0].valueFrom.resourceFieldRef.divisor", "1e-40")},
		{"a downward API volume divisor", podJob(`{"volumes":[{"name":"v","downwardAPI":{"items":[{"path":"p","resourceFieldRef":{"resource":"limits.cpu","divisor":"1e-40"}}]}}]}`),
			beyond(pod+"volumes[0].downwardAPI.items[0].resourceFieldRef.divisor", "1e-40")},
		{"a JSON number", podJob(container(`,"resources":{"requests":{"cpu":-1.5e-999999999}}`)),
			beyond(pod+"containers[0].resources.requests[cpu]", "-1.5e-999999999")},
		{"a string padded with white space", podJob(container(`,"resources":{"requests":{"cpu":"` + " \u00a01e-999999999\u2003 " + `"}}`)),
			beyond(pod+"containers[0].resources.requests[cpu]", "1e-999999999")},
		{"65 digits", podJob(container(`,"resources":{"requests":{"cpu":"` + strings.Repeat("1", 65) + `"}}`)),
			pod + "containers[0].resources.requests[cpu]: quantity of 65 bytes is longer than the 64-byte limit"},
		{"a key with an escape", podJob(container(`,"resources":{"requ\u0065sts":{"c\u0070u":"1e99"}}`)),
			beyond(pod+"containers[0].resources.requests[cpu]", "1e99")},
		{"a key given twice", podJob(container(`,"resources":{"requests":{"cpu":"1"},"requests":{"cpu":"1e99"}}`)),
			beyond(pod+"containers[0].resources.requests[cpu]", "1e99")},
		{"no apiVersion or kind is a Job", `{"spec":{"template":{"spec":{"overhead":{"cpu":"1e99"}}}}}`, beyond(pod+"overhead[cpu]", "1e99")},
		{"a kind in upper case is read as the decoder reads it", `{"APIVERSION":"batch/v1","KIND":"Job","spec":{"template":{"spec":{"overhead":{"cpu":"1e99"}}}}}`,
			beyond(pod+"overhead[cpu]", "1e99")},
		{"a Pod", `{"apiVersion":"v1","kind":"Pod","spec":{"overhead":{"cpu":"1e99"}}}`, `apiVersion "v1" and kind "Pod" are not batch/v1 Job`},
		{"a Job of another version", `{"apiVersion":"batch/v2","kind":"Job","spec":{"x":"1e99"}}`, `apiVersion "batch/v2" and kind "Job" are not batch/v1 Job`},

		// Texts that are no hostile quantity, or are not where one is decoded.
		{"ordinary quantities", podJob(container(`,"resources":{"requests":{"cpu":"100m","memory":"32Gi","x":"1.5Ei","y":"2e3","z":"1e30"}}`)), ""},
		{"args", podJob(container(`,"args":["` + huge + `","1e-30000000"],"command":["1e99"]`)), ""},
		{"labels, annotations and env values", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"labels":{"a":"1e99"},"annotations":{"1e99":"1e-99"}},"spec":{"template":{"spec":` +
			container(`,"env":[{"name":"1e99","value":"1e99"}]`) + `}}}`, ""},
		{"a resource name", podJob(container(`,"resources":{"requests":{"1e99":"1"}}`)), ""},
		{"a field name in another case, which the decoder ignores", podJob(container(`,"resources":{"Requests":{"cpu":"1e99"}}`)), ""},
		{"an unknown field", podJob(container(`,"resources":{"evil":{"cpu":"1e99"}}`)), ""},
		{"an escaped value, which the decoder does not unescape", podJob(container(`,"resources":{"requests":{"cpu":"1\u0065999999999"}}`)), ""},
		{"resources of the wrong JSON type", podJob(container(`,"resources":["1e99"]`)), ""},
		{"a quantity that is an object", podJob(container(`,"resources":{"requests":{"cpu":{"1e99":"1e99"}}}`)), ""},
		{"managed fields", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"managedFields":[{"fieldsV1":{"f:spec":{"f:x":"1e99"}}}]}}`, ""},
		{"invalid JSON", `{"apiVersion":"batch/v1","kind":"Job","spec":{"template":{"spec":{"overhead":{"cpu":"1e99"`, ""},
		{"a JSON string", `"1e99"`, ""},
		{"nothing", ``, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := hostileQuantity([]byte(tc.raw), kinds.Job{}); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("hostileQuantity = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckQuantities(t *testing.T) {
	hostileJob := podJob(`{"overhead":{"cpu":"1e99"}}`)
	for _, tc := range []struct {
		name     string
		old, obj string
		want     string
	}{
		{"a hostile object", "", hostileJob, `tally: decoding Job: spec.template.spec.overhead[cpu]: quantity "1e99" has a decimal exponent beyond ±30`},
		{"a hostile old object", hostileJob, podJob("{}"), `tally: decoding the old Job: spec.template.spec.overhead[cpu]: quantity "1e99" has a decimal exponent beyond ±30`},
		{"neither", podJob("{}"), podJob("{}"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Object: runtime.RawExtension{Raw: []byte(tc.obj)}, OldObject: runtime.RawExtension{Raw: []byte(tc.old)},
			}}
			resp := checkQuantities(req, kinds.Job{})
			switch {
			case tc.want == "" && resp != nil:
				t.Fatalf("answered %+v, want nil", resp.Result)
			case tc.want == "":
			case resp == nil:
				t.Fatalf("no answer, want %q", tc.want)
			case resp.Allowed || resp.Result.Code != http.StatusBadRequest || resp.Result.Message != tc.want:
				t.Fatalf("allowed=%v %d %q, want a 400 %q", resp.Allowed, resp.Result.Code, resp.Result.Message, tc.want)
			}
		})
	}
}

// TestHostileTrainJobQuantity: a TrainJob holds no pod template, but
// its resourcesPerNode are quantities its kind decodes.
func TestHostileTrainJobQuantity(t *testing.T) {
	raw := `{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","spec":{"runtimeRef":{"name":"1e99"},"trainer":{"resourcesPerNode":{"limits":{"nvidia.com/gpu":"1e99"}}}}}`
	want := `spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]: quantity "1e99" has a decimal exponent beyond ±30`
	if err := hostileQuantity([]byte(raw), kinds.TrainJob{}); err == nil || err.Error() != want {
		t.Errorf("hostileQuantity = %v, want %q", err, want)
	}
}

// FuzzHostileQuantity feeds hostileQuantity arbitrary bytes: it must
// neither panic nor loop, and it may refuse only what the scan found.
func FuzzHostileQuantity(f *testing.F) {
	for _, raw := range []string{
		podJob(container(`,"resources":{"requests":{"cpu":"9223E7203685477580927"},"limits":{"memory":1e-30000000}}`)),
		podJob(`{"volumes":[{"name":"v","emptyDir":{"sizeLimit":" 1e99 "}}],"overhead":{"cpu":"1"}}`),
		podJob(container(`,"args":["1e99"],"resources":{"requ\u0065sts":{"c\"pu":"1e99"}}`)),
		`{"apiVersion":"v1","kind":"Pod","spec":{"overhead":{"cpu":"1e99"}}}`,
		`{"spec":{"template":{"spec":{"overhead":{"cpu":"1e99"`, `[1e99]`, `"1e99`, `{"a":}`, "",
	} {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if err := hostileQuantity(raw, kinds.Job{}); err != nil && !scan(raw) {
			t.Fatalf("refused %q, which the scan passed: %v", raw, err)
		}
	})
}

// TestHostileQuantityMatchesDecoder checks hostileQuantity against the
// decoder itself, at every field of a Job: a quantity text that overflows
// int64 in its exponent is rejected at once by ParseQuantity, so the
// decoder must fail on it exactly where hostileQuantity finds it.
func TestHostileQuantityMatchesDecoder(t *testing.T) {
	const (
		marker   = `"123454321"`
		sentinel = "1e99999999999999999999"
	)
	job := &batchv1.Job{}
	fill(reflect.ValueOf(job).Elem(), resource.MustParse(marker[1:len(marker)-1]), 0)
	job.APIVersion, job.Kind = "batch/v1", "Job"
	raw, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	decoder := hostileDecoder()
	if err := decoder.DecodeRaw(runtime.RawExtension{Raw: raw}, &batchv1.Job{}); err != nil {
		t.Fatalf("the filled Job does not decode: %v", err)
	}
	check := func(t *testing.T, raw []byte, isQuantity bool) {
		t.Helper()
		decodeErr := decoder.DecodeRaw(runtime.RawExtension{Raw: raw}, &batchv1.Job{})
		parsed := decodeErr != nil && strings.Contains(decodeErr.Error(), resource.ErrSuffix.Error())
		err := hostileQuantity(raw, kinds.Job{})
		found := err != nil && strings.Contains(err.Error(), "has a decimal exponent beyond ±30")
		if parsed != isQuantity || found != isQuantity {
			at := bytes.Index(raw, []byte(sentinel))
			t.Fatalf("at %s: the decoder parsed it as a quantity: %v (%v); hostileQuantity found it: %v (%v)",
				raw[max(0, at-150):min(len(raw), at+40)], parsed, decodeErr, found, err)
		}
	}
	// Each position of each kind is replaced in turn.
	for _, c := range []struct {
		name       string
		at         *regexp.Regexp
		with       string
		isQuantity bool
		least      int
	}{
		{"quantities as strings", regexp.MustCompile(regexp.QuoteMeta(marker)), `"` + sentinel + `"`, true, 17},
		{"quantities as numbers", regexp.MustCompile(regexp.QuoteMeta(marker)), sentinel, true, 17},
		{"strings", regexp.MustCompile(`"s"`), `"` + sentinel + `"`, false, 100},
		{"map keys", regexp.MustCompile(`"k"`), `"` + sentinel + `"`, false, 20},
		{"numbers", regexp.MustCompile(`:1[,}\]]`), ":" + sentinel, false, 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := c.at.FindAllIndex(raw, -1)
			if len(at) < c.least {
				t.Fatalf("only %d positions of %s in the filled Job", len(at), c.at)
			}
			for _, loc := range at {
				end := loc[1]
				if c.name == "numbers" {
					end-- // keep the delimiter
				}
				next := append(append(append([]byte{}, raw[:loc[0]]...), c.with...), raw[end:]...)
				check(t, next, c.isQuantity)
			}
			t.Logf("%d positions", len(at))
		})
	}
}

// fill sets every field reachable from v through exported fields,
// pointers, one-element slices and one-entry maps: quantities to q,
// strings to "s", map keys to "k", numbers to 1 and booleans to true.
func fill(v reflect.Value, q resource.Quantity, depth int) {
	if depth > 30 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), q, depth+1)
	case reflect.Struct:
		if v.Type() == quantityType {
			v.Set(reflect.ValueOf(q))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), q, depth+1)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // raw bytes, such as managed fields
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), q, depth+1)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		v.Set(reflect.MakeMap(v.Type()))
		elem := reflect.New(v.Type().Elem()).Elem()
		fill(elem, q, depth+1)
		v.SetMapIndex(reflect.ValueOf("k").Convert(v.Type().Key()), elem)
	case reflect.String:
		v.SetString("s")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Bool:
		v.SetBool(true)
	}
}

// typicalJob is a Job as users write them, of about 2 KiB.
const typicalJob = `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"train-resnet-20300102","namespace":"team-a",` +
	`"labels":{"app.kubernetes.io/name":"train","kueue.x-k8s.io/queue-name":"team-a-queue","tally.dev/priority-class":"high"},` +
	`"annotations":{"example.com/owner":"alice@example.com","example.com/run":"2030-01-02T03:04:05Z"}},` +
	`"spec":{"parallelism":4,"completions":4,"backoffLimit":3,"ttlSecondsAfterFinished":3600,"template":{"metadata":{"labels":{"app.kubernetes.io/name":"train"}},` +
	`"spec":{"restartPolicy":"Never","serviceAccountName":"trainer","nodeSelector":{"example.com/pool":"gpu"},` +
	`"containers":[{"name":"trainer","image":"registry.example.com/ml/trainer:v1.24.3@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",` +
	`"command":["python","-m","trainer.main"],"args":["--epochs=90","--batch-size=256","--lr=0.1","--data=/data/imagenet","--out=/out"],` +
	`"env":[{"name":"NCCL_DEBUG","value":"INFO"},{"name":"OMP_NUM_THREADS","value":"8"},{"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],` +
	`"resources":{"requests":{"cpu":"8","memory":"32Gi","nvidia.com/gpu":"1"},"limits":{"cpu":"8","memory":"32Gi","nvidia.com/gpu":"1"}},` +
	`"volumeMounts":[{"name":"data","mountPath":"/data","readOnly":true},{"name":"out","mountPath":"/out"},{"name":"shm","mountPath":"/dev/shm"}]},` +
	`{"name":"sidecar","image":"registry.example.com/tools/uploader:2.3.1","args":["--watch=/out","--bucket=s3://example-ml/runs"],` +
	`"resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"cpu":"500m","memory":"256Mi"}},"volumeMounts":[{"name":"out","mountPath":"/out"}]}],` +
	`"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"imagenet","readOnly":true}},{"name":"out","emptyDir":{}},` +
	`{"name":"shm","emptyDir":{"medium":"Memory","sizeLimit":"16Gi"}}],` +
	`"tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}]}}}}`

// BenchmarkScan measures the scan every Job request pays for: on the Job
// of BenchmarkJobWebhook, on a typical one, and on one with every field
// set.
func BenchmarkScan(b *testing.B) {
	full := &batchv1.Job{}
	fill(reflect.ValueOf(full).Elem(), resource.MustParse("500m"), 0)
	for _, in := range []struct {
		name string
		raw  []byte
	}{
		{"small", jobRequest(b, makeJob("team", "1")).Object.Raw},
		{"typical", []byte(typicalJob)},
		{"full", mustJSON(b, full)},
	} {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.raw)))
			for b.Loop() {
				if scan(in.raw) {
					b.Fatal("found a hostile text")
				}
			}
		})
	}
}
