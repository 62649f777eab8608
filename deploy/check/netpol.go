package check

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Endpoint is one end of a connection for network-policy evaluation: a pod
// (namespace, labels, container ports) or an address outside the cluster.
type Endpoint struct {
	Namespace string
	Labels    map[string]string
	Ports     []corev1.ContainerPort
	// External endpoints have an IP and no namespace; only ipBlock peers
	// match them (how an ipBlock treats pod addresses depends on the CNI, so
	// it never counts here as matching a pod).
	External bool
	IP       netip.Addr
}

// Network evaluates NetworkPolicies the way the Kubernetes API defines them:
// a connection is allowed when the source's egress and the destination's
// ingress both allow it; a pod no policy of a direction selects is open in
// that direction; policies are additive.
type Network struct {
	Policies []*networkingv1.NetworkPolicy
	// NamespaceLabels are each namespace's labels (kubernetes.io/metadata.name
	// is added automatically, as the API server does).
	NamespaceLabels map[string]map[string]string
}

func (n *Network) nsLabels(ns string) labels.Set {
	out := labels.Set{"kubernetes.io/metadata.name": ns}
	for k, v := range n.NamespaceLabels[ns] {
		out[k] = v
	}
	return out
}

// Allowed reports whether src may open a connection to dst on port/protocol.
func (n *Network) Allowed(src, dst Endpoint, port int32, proto corev1.Protocol) bool {
	return n.direction(src, dst, port, proto, networkingv1.PolicyTypeEgress) &&
		n.direction(src, dst, port, proto, networkingv1.PolicyTypeIngress)
}

func (n *Network) direction(src, dst Endpoint, port int32, proto corev1.Protocol, dir networkingv1.PolicyType) bool {
	subject, peer := src, dst
	if dir == networkingv1.PolicyTypeIngress {
		subject, peer = dst, src
	}
	if subject.External {
		return true // outside the cluster: not ours to judge
	}
	selected := false
	for _, p := range n.Policies {
		if p.Namespace != subject.Namespace || !hasType(p, dir) || !selects(p.Spec.PodSelector, subject.Labels) {
			continue
		}
		selected = true
		if dir == networkingv1.PolicyTypeEgress {
			for _, r := range p.Spec.Egress {
				if n.peersMatch(p.Namespace, r.To, peer) && portsMatch(r.Ports, port, proto, dst) {
					return true
				}
			}
		} else {
			for _, r := range p.Spec.Ingress {
				if n.peersMatch(p.Namespace, r.From, peer) && portsMatch(r.Ports, port, proto, dst) {
					return true
				}
			}
		}
	}
	return !selected
}

// hasType applies the API's defaulting: without policyTypes a policy is an
// ingress policy, and an egress one too when it has egress rules.
func hasType(p *networkingv1.NetworkPolicy, t networkingv1.PolicyType) bool {
	if len(p.Spec.PolicyTypes) == 0 {
		return t == networkingv1.PolicyTypeIngress || (t == networkingv1.PolicyTypeEgress && len(p.Spec.Egress) > 0)
	}
	for _, pt := range p.Spec.PolicyTypes {
		if pt == t {
			return true
		}
	}
	return false
}

func selects(sel metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(l))
}

func (n *Network) peersMatch(policyNS string, peers []networkingv1.NetworkPolicyPeer, e Endpoint) bool {
	if len(peers) == 0 {
		return true // no from/to: every source or destination
	}
	for _, p := range peers {
		switch {
		case p.IPBlock != nil:
			if e.External && inBlock(*p.IPBlock, e.IP) {
				return true
			}
		case e.External:
		case p.NamespaceSelector != nil:
			if selects(*p.NamespaceSelector, n.nsLabels(e.Namespace)) &&
				(p.PodSelector == nil || selects(*p.PodSelector, e.Labels)) {
				return true
			}
		case p.PodSelector != nil:
			if e.Namespace == policyNS && selects(*p.PodSelector, e.Labels) {
				return true
			}
		}
	}
	return false
}

func inBlock(b networkingv1.IPBlock, ip netip.Addr) bool {
	pfx, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !pfx.Contains(ip) {
		return false
	}
	for _, ex := range b.Except {
		if e, err := netip.ParsePrefix(ex); err == nil && e.Contains(ip) {
			return false
		}
	}
	return true
}

// portsMatch: a named port is resolved against the destination's container
// ports, as the API defines for both directions.
func portsMatch(ports []networkingv1.NetworkPolicyPort, port int32, proto corev1.Protocol, dst Endpoint) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		pp := corev1.ProtocolTCP
		if p.Protocol != nil {
			pp = *p.Protocol
		}
		if pp != proto {
			continue
		}
		if p.Port == nil {
			return true
		}
		if p.Port.Type == intstr.Int {
			lo, hi := p.Port.IntVal, p.Port.IntVal
			if p.EndPort != nil {
				hi = *p.EndPort
			}
			if port >= lo && port <= hi {
				return true
			}
			continue
		}
		for _, cp := range dst.Ports {
			cpp := cp.Protocol
			if cpp == "" {
				cpp = corev1.ProtocolTCP
			}
			if cp.Name == p.Port.StrVal && cp.ContainerPort == port && cpp == proto {
				return true
			}
		}
	}
	return false
}
