// The autoscaler Function App on a Flex Consumption plan (FC1, Linux, Python 3.11).
// Every connection is identity-based through one user-assigned managed identity: no account key,
// no connection string with a key. On Flex Consumption the runtime, the deployment source and the
// scale limits live in functionAppConfig (FUNCTIONS_WORKER_RUNTIME / FUNCTIONS_EXTENSION_VERSION
// and WEBSITE_RUN_FROM_PACKAGE must not be set as app settings).

@description('Name of the Function App.')
param name string

@description('Name of the Flex Consumption plan.')
param planName string

@description('Azure region.')
param location string

@description('Tags applied to the plan and the app.')
param tags object = {}

@description('azd service name (azure.yaml) that deploys to this app.')
param serviceName string = 'autoscaler'

@description('Resource id of the user-assigned managed identity.')
param identityId string

@description('Client id of the user-assigned managed identity.')
param identityClientId string

@description('Name of the autoscaler storage account.')
param storageAccountName string

@description('Blob endpoint of the storage account.')
param blobEndpoint string

@description('Queue endpoint of the storage account.')
param queueEndpoint string

@description('Table endpoint of the storage account.')
param tableEndpoint string

@description('Blob container holding the deployment package.')
param deploymentContainerName string

@description('Application Insights connection string (not a secret: local auth is disabled).')
param applicationInsightsConnectionString string

@description('AUTOSCALER_POLICY: the policy JSON (targets, rules, bounds).')
param autoscalerPolicy string

@description('COLLECT_SCHEDULE: NCRONTAB schedule of the collect timer.')
param collectSchedule string

@description('SCALER_DRY_RUN: record decisions without resizing plans.')
param scalerDryRun bool

@description('HISTORY_RETENTION_DAYS: days of metric history kept in Table storage.')
param historyRetentionDays int

@description('OWNERSHIP_EXPIRY_SECONDS: age after which a partition ownership blob counts as expired.')
param ownershipExpirySeconds int

@description('Upper bound of instances Flex Consumption may start for this app.')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 40

@description('Memory per instance, in MB.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
  }
}

resource functionApp 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  tags: union(tags, {
    'azd-service-name': serviceName
  })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    siteConfig: {
      minTlsVersion: '1.2'
      scmMinTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
      remoteDebuggingEnabled: false
      // Identity-based host storage: the host builds its blob, queue and table clients from
      // these settings and authenticates as the user-assigned identity (__credential + __clientId).
      appSettings: [
        {
          name: 'AzureWebJobsStorage__accountName'
          value: storageAccountName
        }
        {
          name: 'AzureWebJobsStorage__credential'
          value: 'managedidentity'
        }
        {
          name: 'AzureWebJobsStorage__clientId'
          value: identityClientId
        }
        {
          name: 'AzureWebJobsStorage__blobServiceUri'
          value: blobEndpoint
        }
        {
          name: 'AzureWebJobsStorage__queueServiceUri'
          value: queueEndpoint
        }
        {
          name: 'AzureWebJobsStorage__tableServiceUri'
          value: tableEndpoint
        }
        // DefaultAzureCredential in the app code picks the user-assigned identity from this.
        {
          name: 'AZURE_CLIENT_ID'
          value: identityClientId
        }
        {
          name: 'APPLICATIONINSIGHTS_CONNECTION_STRING'
          value: applicationInsightsConnectionString
        }
        {
          name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING'
          value: 'ClientId=${identityClientId};Authorization=AAD'
        }
        // The Python worker's OpenTelemetry switch (host.json has "telemetryMode": "OpenTelemetry"):
        // the invocation's trace context reaches the app, whose spans and metrics the Azure Monitor
        // distro exports (scaling/telemetry/monitor.py).
        {
          name: 'PYTHON_ENABLE_OPENTELEMETRY'
          value: 'true'
        }
        {
          name: 'AUTOSCALER_POLICY'
          value: autoscalerPolicy
        }
        {
          name: 'COLLECT_SCHEDULE'
          value: collectSchedule
        }
        {
          name: 'SCALER_DRY_RUN'
          value: scalerDryRun ? 'true' : 'false'
        }
        {
          name: 'HISTORY_RETENTION_DAYS'
          value: string(historyRetentionDays)
        }
        {
          name: 'OWNERSHIP_EXPIRY_SECONDS'
          value: string(ownershipExpirySeconds)
        }
      ]
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${blobEndpoint}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      runtime: {
        name: 'python'
        version: '3.11'
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
      }
    }
  }
}

output name string = functionApp.name
output id string = functionApp.id
output defaultHostName string = functionApp.properties.defaultHostName
output planName string = plan.name
