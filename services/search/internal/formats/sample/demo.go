package sample

// Demo lists the demo knowledge base's documents in formats other than
// markdown, by path under services/search/demo/docs. Their names sort after
// the markdown pages of the last folder, so adding them left the ids of the
// existing demo chunks as they were. Regenerate the files with
// `BMCIS_UPDATE_DEMO=1 go test ./internal/formats/sample` (in services/search).
var Demo = []struct {
	Path   string
	Format string
	Doc    Doc
}{
	{"vendor-management/vendor-uptime-review-2025.pdf", "pdf", Doc{
		Title: "Vendor Uptime Review 2025",
		Pages: [][]Block{{
			{Level: 1, Text: "Summary"},
			{Text: "This review compares the measured availability of our tier 1 vendors with the targets in their service level agreements for the year 2025. SRE measured availability with synthetic probes from three regions, independently of the status pages the vendors publish."},
			{Text: "Four of the six tier 1 vendors met their monthly targets in every month. Stark Cloud missed its 99.95 percent target in March and August; Globex missed it in November during a storage migration that was announced too late to count as scheduled maintenance."},
			{Level: 1, Text: "Method"},
			{Text: "Probes send real API requests every thirty seconds and count a minute as unavailable when more than five percent of requests fail or exceed the latency bound agreed in the SLA schedule. Maintenance minutes are excluded only when the vendor announced them five working days ahead."},
		}, {
			{Level: 1, Text: "Findings by vendor"},
			{Level: 2, Text: "Stark Cloud"},
			{Text: "Measured availability was 99.91 percent in March, caused by a regional load balancer fault lasting forty minutes, and 99.93 percent in August after a faulty certificate rotation. Both incidents were reported to us within the thirty-minute P1 response time."},
			{Level: 2, Text: "Globex"},
			{Text: "Measured availability was 99.89 percent in November. The storage migration notice arrived two working days ahead, so the minutes count against the target. Globex accepted the finding without dispute."},
			{Level: 2, Text: "Initech and Hooli"},
			{Text: "Both vendors exceeded their targets in every month, with a lowest month of 99.98 percent for Initech and 99.99 percent for Hooli."},
		}, {
			{Level: 1, Text: "Actions"},
			{Text: "The Vendor Management Office has claimed service credits from Stark Cloud and Globex as described in the service credit schedule. Stark Cloud moves to monthly service reviews until two consecutive quarters meet target. Renewal discussions with Globex will require a maintenance notice period of ten working days."},
		}},
	}},
	{"vendor-management/vendor-uptime-service-credits.pdf", "pdf", Doc{
		Title: "Vendor Service Credit Schedule",
		Pages: [][]Block{{
			{Level: 1, Text: "When credits apply"},
			{Text: "A service credit is owed when a vendor's measured monthly availability falls below the target in its SLA. Credits are a percentage of the monthly fee for the affected service and are claimed by the Vendor Management Office within sixty days of the end of the month."},
			{Level: 1, Text: "Credit levels"},
			{Text: "Below the target but at least 99.0 percent: ten percent of the monthly fee. Below 99.0 percent but at least 95.0 percent: twenty-five percent. Below 95.0 percent: fifty percent, and the miss counts as a material breach that allows termination without penalty."},
		}, {
			{Level: 1, Text: "Claiming a credit"},
			{Text: "Attach the SRE availability report for the month, the incident references and the vendor's own post-incident report. Finance deducts accepted credits from the next invoice; disputed credits go to the quarterly business review with the vendor's account manager."},
			{Level: 2, Text: "Repeated misses"},
			{Text: "Three misses within twelve months trigger a vendor risk reassessment and an exit plan review, even when every credit was paid."},
		}},
	}},
	{"vendor-management/vendor-visitor-policy.docx", "docx", Doc{
		Title: "Vendor Visitor Policy",
		Pages: [][]Block{{
			{Level: 1, Text: "Scope"},
			{Text: "This policy covers employees of vendors and contractors who visit a BMCIS office or data centre cage, for meetings, installation work or audits."},
			{Level: 1, Text: "Before the visit"},
			{Text: "The BMCIS host registers the visitor in the reception system at least one working day ahead, with the visitor's name, company, purpose and the areas to be visited. Visits to the data centre cage need approval from the infrastructure on-call lead."},
			{Level: 2, Text: "Non-disclosure"},
			{Text: "Visitors from vendors without a signed non-disclosure agreement may only enter meeting rooms on the ground floor."},
			{Level: 1, Text: "During the visit"},
			{Text: "Visitors wear a red badge at all times and are escorted by their host outside meeting rooms. Photography of screens, whiteboards and network equipment is not allowed. Vendor laptops connect only to the guest wireless network, never to the office network."},
			{Level: 1, Text: "After the visit"},
			{Text: "The host returns the badge to reception the same day. Lost badges are reported to the security team, which disables them within one hour."},
		}},
	}},
	{"vendor-management/vendor-whistleblowing-guide.docx", "docx", Doc{
		Title: "Whistleblowing Guide for Vendors",
		Pages: [][]Block{{
			{Level: 1, Text: "Why this guide exists"},
			{Text: "People who work for our vendors sometimes see things we need to know: bribery, falsified audit evidence, safety risks, or misuse of BMCIS customer data. This guide explains how they can tell us, safely and in confidence."},
			{Level: 1, Text: "How to report"},
			{Text: "Reports go to the independent ethics line, by web form or telephone, in English, German or Spanish. Reports may be anonymous. The ethics line passes them to the BMCIS compliance officer without the reporter's contact details unless the reporter agrees."},
			{Level: 2, Text: "What to include"},
			{Text: "Describe what happened, when and where, who was involved, and any documents that support the report. A report does not need proof; an honest concern is enough."},
			{Level: 1, Text: "Protection from retaliation"},
			{Text: "BMCIS does not tolerate retaliation against a reporter by its own staff or by a vendor. Vendor contracts oblige vendors to protect reporters, and retaliation is grounds for terminating the contract."},
		}},
	}},
	{"vendor-management/vendor-web-portal-faq.html", "html", Doc{
		Title: "Vendor Portal FAQ",
		Pages: [][]Block{{
			{Level: 1, Text: "Getting access"},
			{Text: "Vendors receive portal accounts from their BMCIS relationship owner. Each account belongs to one named person; shared accounts are closed without notice. Multi-factor authentication with an authenticator app is required from the first login."},
			{Level: 1, Text: "Invoices"},
			{Text: "Upload invoices as PDF through the portal, one invoice per upload, quoting the purchase order number. Invoices sent by email are not processed. Payment terms are thirty days from the date the invoice is approved."},
			{Level: 2, Text: "Rejected invoices"},
			{Text: "The portal shows the reason for a rejection, such as a missing purchase order number or a bank account that differs from the one on file. Changing bank details needs a call-back verification with the finance team."},
			{Level: 1, Text: "Security questionnaires"},
			{Text: "Annual security questionnaires are answered in the portal. Evidence files up to twenty megabytes each can be attached; larger evidence is shared through a link agreed with the vendor security team."},
		}},
	}},
	{"vendor-management/vendor-workshop-agenda.html", "html", Doc{
		Title: "Vendor Risk Workshop Agenda",
		Pages: [][]Block{{
			{Level: 1, Text: "Purpose"},
			{Text: "The yearly vendor risk workshop brings the Vendor Management Office, security, legal and the owners of tier 1 vendors together to review concentration risk and exit plans."},
			{Level: 1, Text: "Morning"},
			{Text: "Review of the vendor uptime report and the service credits claimed. Each owner of a tier 1 vendor presents the exit plan for that vendor, including the time needed to move to an alternative and the data that would have to be migrated."},
			{Level: 1, Text: "Afternoon"},
			{Text: "Concentration risk: which business processes depend on a single vendor or a single cloud region, and which of those dependencies can be reduced next year. Legal presents changes to the standard data processing agreement."},
			{Level: 1, Text: "Outcomes"},
			{Text: "The workshop ends with a list of actions, each with an owner and a due date, recorded in the vendor risk register within one week."},
		}},
	}},
}

// Bytes renders a demo entry in its format.
func Bytes(format string, d Doc) []byte {
	switch format {
	case "pdf":
		return PDF(d)
	case "docx":
		return DOCX(d)
	case "html":
		return HTML(d)
	}
	panic("sample: no writer for " + format)
}
