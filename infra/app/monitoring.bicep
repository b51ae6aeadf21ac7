// Log Analytics workspace + workspace-based Application Insights. Local (instrumentation key)
// authentication is disabled: telemetry is accepted only with an Entra ID token, which the host
// obtains for the managed identity named in APPLICATIONINSIGHTS_AUTHENTICATION_STRING.

@description('Name of the Log Analytics workspace.')
param logAnalyticsName string

@description('Name of the Application Insights component.')
param applicationInsightsName string

@description('Azure region.')
param location string

@description('Tags applied to both resources.')
param tags object = {}

@description('Days of log retention in the workspace.')
@minValue(30)
@maxValue(730)
param retentionInDays int = 30

@description('Principal id of the managed identity that publishes telemetry.')
param publisherPrincipalId string

// Monitoring Metrics Publisher: lets an Entra ID identity send telemetry to a component whose
// local authentication is disabled.
var monitoringMetricsPublisherRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '3913510d-42f4-4e42-8a64-420c390055eb')

resource logAnalytics 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
  }
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logAnalytics.id
    DisableLocalAuth: true
  }
}

resource telemetryPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, publisherPrincipalId, monitoringMetricsPublisherRoleId)
  scope: applicationInsights
  properties: {
    description: 'Monitoring Metrics Publisher: the autoscaler sends telemetry with Entra ID (local auth is off)'
    principalId: publisherPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: monitoringMetricsPublisherRoleId
  }
}

output applicationInsightsName string = applicationInsights.name
output applicationInsightsId string = applicationInsights.id
// A connection string holds an ingestion endpoint and the instrumentation key, which is an
// identifier and not a credential (local auth is disabled above).
output applicationInsightsConnectionString string = applicationInsights.properties.ConnectionString
output logAnalyticsWorkspaceId string = logAnalytics.id
