package sample

// Handbook is a three-page outline with two heading levels, a heading
// whose section runs across a page break, and punctuation that markup must
// not swallow: the shared fixture of the format tests.
var Handbook = Doc{
	Title: "Employee Handbook",
	Pages: [][]Block{
		{
			{Level: 1, Text: "Welcome"},
			{Text: "This handbook explains how the company works day to day. Read it during your first week and keep it close: it answers most questions about leave, expenses, equipment and security (version 3, reviewed yearly)."},
			{Level: 2, Text: "Working hours"},
			{Text: "Core hours run from ten to four in your local time zone. Outside core hours you choose when to work, as long as your team can reach you for planned meetings and incidents."},
			{Level: 1, Text: "Equipment"},
			{Text: "Every employee receives a laptop with full-disk encryption enabled. Lost or stolen devices must be reported to the service desk within one hour so the device can be wiped remotely."},
		},
		{
			{Text: "Personal devices may read email through the managed mobile application only; copying customer data onto them is never allowed."},
			{Level: 1, Text: "Expenses"},
			{Text: "Submit receipts within thirty days of purchase. Travel above five hundred euros needs approval from your manager before booking, and the finance team reimburses approved claims twice a month."},
			{Level: 2, Text: "Per diem"},
			{Text: "Meals while travelling are covered by a fixed daily allowance that depends on the destination country; keep boarding passes as proof of travel dates."},
		},
		{
			{Level: 1, Text: "Security"},
			{Text: "Report a suspected phishing message with the report button in your mail client. Never forward it to colleagues, and never enter your password on a page you reached through a link in an unexpected message."},
			{Level: 2, Text: "Passwords"},
			{Text: "Use the company password manager for every work account, with a unique generated passphrase of at least sixteen characters and hardware-key second factors."},
		},
	},
}
