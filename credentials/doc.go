// Package credentials defines how valet reaches a tenant's secrets (OAuth
// tokens, API keys) on behalf of a tool: the [Store] interface, the [Secret]
// value that never prints its contents, and the metadata [Info].
//
// A tool reads the store through its execution context:
//
//	ec := tool.ExecContextFrom(ctx)
//	secret, err := ec.Credentials.Get(ctx, ec.TenantID, "gmail", "")
//	if errors.Is(err, credentials.ErrNotFound) { ... ask the user to connect ... }
//	var tok struct{ AccessToken string `json:"access_token"` }
//	err = secret.Decode(&tok)
//
// The account "" means the tenant's primary account for a service.
package credentials
