// The autoscaler's only identity: a user-assigned managed identity shared by the Functions host
// (AzureWebJobsStorage, deployment package, Application Insights) and the app code
// (DefaultAzureCredential with AZURE_CLIENT_ID). Every role assignment targets its principal.

@description('Name of the user-assigned managed identity.')
param name string

@description('Azure region.')
param location string

@description('Tags applied to the identity.')
param tags object = {}

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: name
  location: location
  tags: tags
}

output id string = identity.id
output name string = identity.name
output clientId string = identity.properties.clientId
output principalId string = identity.properties.principalId
