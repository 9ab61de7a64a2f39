// Package azure opens Azure Blob Storage containers (azblob:// URLs) as an
// objstore.Store, through gocloud.dev/blob/azureblob. It is compiled only
// with the build tag "azure" (go build -tags azure), so default builds do
// not link the Azure SDK.
//
// URL form: azblob://container/prefix[?storage_account=…&domain=…&protocol=…&localemu=true]
// — the path is the key prefix; the query goes to azureblob unchanged.
// Credentials come from the environment as azureblob documents:
// AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or
// AZURE_STORAGE_CONNECTION_STRING, else azidentity's default chain.
//
// PutIfAbsent is a write with If-None-Match: * (conflict → objstore.ErrExists),
// atomic for every client of the container. This backend is compile-checked;
// no Azure endpoint or Azurite emulator runs where moraine is tested, so it
// has not run against a server.
package azure
