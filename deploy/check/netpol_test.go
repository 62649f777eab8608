package check_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bmcis/knowledge/deploy/check"
)

// The network policies allow exactly the paths the architecture needs,
// evaluated from the rendered policies as the NetworkPolicy API defines them.

// Addresses outside the cluster.
var (
	internetClient = netip.MustParseAddr("203.0.113.7")  // a user, through the load balancer
	externalDB     = netip.MustParseAddr("10.200.0.5")   // a managed PostgreSQL
	externalRedis  = netip.MustParseAddr("10.200.0.6")   // a managed Redis
	internetHost   = netip.MustParseAddr("198.51.100.9") // anything on the internet
)

type flow struct {
	from, to string // workload names, "kube-dns", "monitoring", or "ext:ADDR"
	port     int32
	proto    corev1.Protocol
	allowed  bool
}

func tcp(from, to string, port int32, allowed bool) flow {
	return flow{from, to, port, corev1.ProtocolTCP, allowed}
}

func TestNetworkPolicyPaths(t *testing.T) {
	common := []flow{
		// The architecture's paths.
		tcp("mcp-adapter", "search", 50051, true),
		tcp("mcp-adapter", "vendorgraph", 50052, true),
		tcp("mcp-adapter", "auth", 50053, true),
		tcp("gateway", "search", 50051, true),
		tcp("gateway", "vendorgraph", 50052, true),
		tcp("gateway", "auth", 50053, true),
		tcp("gateway", "search", 9091, true), // dashboard stats
		tcp("gateway", "vendorgraph", 9092, true),
		tcp("gateway", "auth", 9093, true),
		tcp("gateway", "mcp-adapter", 8090, true), // dashboard health
		tcp("gateway", "mcp-adapter", 9095, true), // dashboard tool stats
		tcp("monitoring", "mcp-adapter", 9095, true),
		tcp("ext:"+internetClient.String(), "gateway", 8080, true),
		tcp("ext:"+internetClient.String(), "mcp-adapter", 8090, true),
		tcp("monitoring", "search", 9091, true),
		tcp("monitoring", "auth", 9093, true),
		tcp("monitoring", "gateway", 9094, true),
		{"search", "kube-dns", 53, corev1.ProtocolUDP, true},
		{"mcp-adapter", "kube-dns", 53, corev1.ProtocolUDP, true},
		tcp("bmcis-migrate", "kube-dns", 53, true),

		// Everything else is refused.
		tcp("ext:"+internetClient.String(), "search", 50051, false),
		tcp("ext:"+internetClient.String(), "auth", 50053, false),
		tcp("ext:"+internetClient.String(), "search", 9091, false),
		tcp("ext:"+internetClient.String(), "gateway", 9094, false),
		tcp("monitoring", "search", 50051, false),
		tcp("mcp-adapter", "search", 9091, false), // metrics are the gateway's and Prometheus's
		tcp("search", "vendorgraph", 50052, false),
		tcp("search", "auth", 50053, false),
		tcp("vendorgraph", "search", 50051, true), // the names an import changed (SyncEntityNames)
		tcp("vendorgraph", "search", 9091, false),
		tcp("auth", "search", 50051, false),
		tcp("search", "mcp-adapter", 8090, false),
		tcp("search", "mcp-adapter", 9095, false),
		tcp("ext:"+internetClient.String(), "mcp-adapter", 9095, false),
		tcp("mcp-adapter", "gateway", 8080, false),
		tcp("mcp-adapter", "ext:"+externalDB.String(), 5432, false),
		tcp("gateway", "ext:"+externalDB.String(), 5432, false),
		tcp("search", "ext:"+internetHost.String(), 443, false), // no embedder egress unless the component is added
		tcp("gateway", "ext:"+internetHost.String(), 443, false),
		tcp("mcp-adapter", "ext:"+internetHost.String(), 443, false),
		tcp("search", "ext:"+externalRedis.String(), 6379, false),
		{"search", "ext:" + internetHost.String(), 53, corev1.ProtocolUDP, false}, // DNS only to the cluster's
	}
	perOverlay := map[string][]flow{
		"dev": {
			tcp("search", "postgres", 5432, true),
			tcp("vendorgraph", "postgres", 5432, true),
			tcp("auth", "postgres", 5432, true),
			tcp("bmcis-migrate", "postgres", 5432, true),
			tcp("auth", "redis", 6379, true),
			tcp("mcp-adapter", "postgres", 5432, false),
			tcp("gateway", "postgres", 5432, false),
			tcp("ext:"+internetClient.String(), "postgres", 5432, false),
			tcp("mcp-adapter", "redis", 6379, false),
			tcp("search", "redis", 6379, false),
			tcp("postgres", "search", 50051, false),
			tcp("redis", "ext:"+internetHost.String(), 443, false),
		},
		"prod": {
			tcp("search", "ext:"+externalDB.String(), 5432, true),
			tcp("vendorgraph", "ext:"+externalDB.String(), 5432, true),
			tcp("auth", "ext:"+externalDB.String(), 5432, true),
			tcp("bmcis-migrate", "ext:"+externalDB.String(), 5432, true),
			tcp("auth", "ext:"+externalRedis.String(), 6379, true),
			tcp("search", "ext:"+externalDB.String(), 5433, false),
		},
	}
	// prod+components' paths are TestOptionalComponentsOnProd's: its egress
	// components open some of what common refuses.
	for _, ov := range []string{"dev", "prod"} {
		objs := rendered(t, ov)
		net, pods, ns := network(t, objs)
		for _, f := range append(append([]flow{}, common...), perOverlay[ov]...) {
			verb := "denied"
			if f.allowed {
				verb = "allowed"
			}
			t.Run(fmt.Sprintf("%s/%s->%s:%d/%s/%s", ov, f.from, f.to, f.port, f.proto, verb), func(t *testing.T) {
				src := endpoint(t, f.from, pods, ns)
				dst := endpoint(t, f.to, pods, ns)
				require.Equal(t, f.allowed, net.Allowed(src, dst, f.port, f.proto))
			})
		}
	}
}

// network builds the evaluator from the rendered objects, plus the namespaces
// a cluster has around the application: kube-system (DNS) and a monitoring
// namespace labelled bmcis.io/monitoring=true.
func network(t *testing.T, objs []check.Object) (*check.Network, map[string]check.Endpoint, string) {
	t.Helper()
	n := &check.Network{NamespaceLabels: map[string]map[string]string{
		"kube-system": {},
		"monitoring":  {"bmcis.io/monitoring": "true"},
	}}
	nss := check.Of[*corev1.Namespace](objs)
	require.Len(t, nss, 1)
	ns := nss[0].Name
	n.NamespaceLabels[ns] = nss[0].Labels
	n.Policies = check.Of[*networkingv1.NetworkPolicy](objs)
	pods := map[string]check.Endpoint{
		"kube-dns": {Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", ContainerPort: 53}}},
		"monitoring": {Namespace: "monitoring", Labels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
	}
	for _, w := range check.Workloads(objs) {
		var ports []corev1.ContainerPort
		for _, c := range w.Template.Spec.Containers {
			ports = append(ports, c.Ports...)
		}
		name := w.Template.Labels["app.kubernetes.io/name"]
		require.NotEmpty(t, name, "%s pods carry app.kubernetes.io/name", w.ID())
		e := check.Endpoint{Namespace: w.Namespace, Labels: w.Template.Labels, Ports: ports}
		pods[name] = e
		// Also by workload name: the backup's pods carry the migration's
		// name label (components/backup).
		pods[w.Name] = e
	}
	return n, pods, ns
}

func endpoint(t *testing.T, name string, pods map[string]check.Endpoint, _ string) check.Endpoint {
	t.Helper()
	if len(name) > 4 && name[:4] == "ext:" {
		return check.Endpoint{External: true, IP: netip.MustParseAddr(name[4:])}
	}
	e, ok := pods[name]
	require.True(t, ok, "no pods named %s", name)
	return e
}

// The evaluator itself, on hand-made policies.
func TestNetworkEvaluator(t *testing.T) {
	tcpP := corev1.ProtocolTCP
	a := check.Endpoint{Namespace: "x", Labels: map[string]string{"app": "a"}}
	b := check.Endpoint{Namespace: "x", Labels: map[string]string{"app": "b"}, Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: 9000}}}
	other := check.Endpoint{Namespace: "y", Labels: map[string]string{"app": "a"}}
	ext := check.Endpoint{External: true, IP: netip.MustParseAddr("192.0.2.1")}
	deny := &networkingv1.NetworkPolicy{}
	deny.Namespace = "x"
	deny.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	allowAB := &networkingv1.NetworkPolicy{}
	allowAB.Namespace = "x"
	allowAB.Spec.PodSelector.MatchLabels = map[string]string{"app": "b"}
	allowAB.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	grpcPort := intstr.FromString("grpc")
	allowAB.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
		From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcpP, Port: &grpcPort}},
	}}
	egressA := &networkingv1.NetworkPolicy{}
	egressA.Namespace = "x"
	egressA.Spec.PodSelector.MatchLabels = map[string]string{"app": "a"}
	egressA.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	egressA.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
		To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24", Except: []string{"192.0.2.128/25"}}}},
	}}
	tests := []struct {
		name     string
		policies []*networkingv1.NetworkPolicy
		src, dst check.Endpoint
		port     int32
		want     bool
	}{
		{"no policies: open", nil, a, b, 9000, true},
		{"default deny", []*networkingv1.NetworkPolicy{deny}, a, b, 9000, false},
		{"deny in another namespace does not apply", []*networkingv1.NetworkPolicy{deny}, other, other, 1, true},
		{"ingress without egress", []*networkingv1.NetworkPolicy{deny, allowAB}, a, b, 9000, false},
		{"ingress and egress", []*networkingv1.NetworkPolicy{deny, allowAB, egressA}, a, b, 9000, true},
		{"named port resolves on the destination", []*networkingv1.NetworkPolicy{deny, allowAB, egressA}, a, b, 9001, false},
		{"pod selector is namespace-local", []*networkingv1.NetworkPolicy{allowAB}, other, b, 9000, false},
		{"ipBlock", []*networkingv1.NetworkPolicy{deny, egressA}, a, ext, 443, true},
		{"ipBlock except", []*networkingv1.NetworkPolicy{deny, egressA}, a, check.Endpoint{External: true, IP: netip.MustParseAddr("192.0.2.200")}, 443, false},
		{"ipBlock never matches a pod", []*networkingv1.NetworkPolicy{deny, egressA}, a, check.Endpoint{Namespace: "x", Labels: map[string]string{"app": "c"}}, 443, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := &check.Network{Policies: tc.policies}
			require.Equal(t, tc.want, n.Allowed(tc.src, tc.dst, tc.port, corev1.ProtocolTCP))
		})
	}
}
