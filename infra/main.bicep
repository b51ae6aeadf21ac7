// Event Hubs lag autoscaler: everything `azd up` provisions.
//
// In its own resource group: a user-assigned managed identity, a storage account (host storage,
// queues, tables, deployment container), Log Analytics + Application Insights and the Function App
// on a Flex Consumption plan.
// On the existing resources it watches and resizes (any resource group, any subscription of the
// tenant): least-privilege role assignments for that identity, each scoped to the narrowest
// resource Bicep allows.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('Name of the azd environment; used in resource names and the azd-env-name tag.')
param environmentName string

@minLength(1)
@description('Region of the autoscaler resources.')
param location string

@description('Resource group of the autoscaler; empty for rg-<environmentName>.')
param resourceGroupName string = ''

@minLength(1)
@description('Event Hubs namespaces watched: objects { "resourceId": "<namespace resource id>", "eventHubs": ["<hub>", ...] }. "eventHubs" is optional: when present, Azure Event Hubs Data Receiver is assigned on those hubs only, otherwise on the namespace. Consumer groups need no role (they go in the policy).')
param eventHubNamespaces array

@minLength(1)
@description('Checkpoint stores read: objects { "storageAccountId": "<storage account resource id>", "containerName": "<container>" }. Storage Blob Data Reader is assigned on each container.')
param checkpointContainers array

@description('Optional Service Bus namespaces watched (resource ids; the policy names each as namespaceResourceId or metricsResourceId). A custom read-only role (queues/read, topics/subscriptions/read: the management plane\'s message counts, no data action) is assigned on each.')
param serviceBusNamespaceIds array = []

@description('Optional Event Hubs namespaces whose throughput units the autoscaler sizes (the policy\'s namespaces[].resource_id). A custom role (namespace read and write) and Monitoring Reader are assigned on each namespace only.')
param eventHubsTuNamespaceIds array = []

@description('With eventHubsTuNamespaceIds: deny, on each of those namespaces, any change of a pinned setting (all but the few without a policy alias, docs/deploy.md) and any sku.capacity outside its target\'s min_tus..max_tus (a custom Azure Policy definition and assignment per namespace, pinning the values the namespace has at deployment time), so the TU scaler role\'s namespaces/write can change little but the capacity. It binds everyone, owners too: false turns the deny into report-only (DoNotEnforce) to change a setting; deploy again with true to pin the new values.')
param pinEventHubsNamespaceSettings bool = true

@description('Optional Service Bus namespaces whose queues feed mode slo (resource ids, each also in serviceBusNamespaceIds; the policy names it as metricsResourceId). Monitoring Reader is assigned on each: the queue rates come from Azure Monitor (IncomingMessages, CompleteMessage).')
param serviceBusSloNamespaceIds array = []

@description('Optional Service Bus queues that feed mode slo (queue resource ids: <namespace resource id>/queues/<queue>). Azure Service Bus Data Receiver is assigned on each queue alone, never on a namespace: the oldest message\'s age is read by a peek, which needs Listen.')
param serviceBusSloQueueIds array = []

@minLength(1)
@description('App Service Plans the autoscaler may resize (resource ids). The custom plan-scaler role is assigned on each plan and nowhere else.')
param targetPlanIds array

@description('AUTOSCALER_POLICY: the policy (targets, rules, bounds); stored as compact JSON in the app setting.')
param autoscalerPolicy object

@description('COLLECT_SCHEDULE: NCRONTAB schedule of the collect timer (six fields, seconds first).')
param collectSchedule string = '0 */1 * * * *'

@description('SCALER_DRY_RUN: when true, decisions are recorded but no plan is resized.')
param scalerDryRun bool = false

@minValue(1)
@description('HISTORY_RETENTION_DAYS: days of metric history kept in Table storage.')
param historyRetentionDays int = 30

@minValue(1)
@description('OWNERSHIP_EXPIRY_SECONDS: age after which a partition ownership blob counts as expired.')
param ownershipExpirySeconds int = 60

@minValue(1)
@maxValue(1000)
@description('Flex Consumption: maximum number of instances of the autoscaler app.')
param maximumInstanceCount int = 40

@allowed([
  512
  2048
  4096
])
@description('Flex Consumption: memory per instance, in MB.')
param instanceMemoryMB int = 2048

@description('E-mail addresses notified by the alert rules (SLO breached, collector silent, scale writes failing, dead letters, hot or unowned partition or stalled consumers); empty: no action group, the alerts still show in Azure Monitor.')
param alertEmailAddresses array = []

var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
}
var serviceName = 'autoscaler'
var deploymentContainerName = 'app-package-${resourceToken}'

// '/subscriptions/<sub>/resourceGroups/<rg>' of every target plan: the custom role is assignable
// there only (union removes duplicates when several plans share a resource group).
var planResourceGroupScopes = [for planId in targetPlanIds: join(take(split(planId, '/'), 5), '/')]
// The same for the watched Service Bus namespaces: where the custom entity reader role may be assigned.
var serviceBusResourceGroupScopes = [for sbId in serviceBusNamespaceIds: join(take(split(sbId, '/'), 5), '/')]
var serviceBusReaderRoleName = guid(subscription().id, 'eventhubs-lag-autoscaler-servicebus-reader', resourceToken)
// The same for the namespaces whose throughput units are sized.
var tuNamespaceResourceGroupScopes = [for nsId in eventHubsTuNamespaceIds: join(take(split(nsId, '/'), 5), '/')]
var tuScalerRoleName = guid(subscription().id, 'eventhubs-lag-autoscaler-tu-scaler', resourceToken)

resource rg 'Microsoft.Resources/resourceGroups@2022-09-01' = {
  name: empty(resourceGroupName) ? 'rg-${environmentName}' : resourceGroupName
  location: location
  tags: tags
}

// Custom role: read and resize App Service Plans, nothing else. The built-in Website Contributor
// does not cover Microsoft.Web/serverfarms and Web Plan Contributor can also delete plans and
// manage every plan in its scope.
resource planScalerRole 'Microsoft.Authorization/roleDefinitions@2022-04-01' = {
  name: guid(subscription().id, 'eventhubs-lag-autoscaler-plan-scaler', resourceToken)
  properties: {
    roleName: 'App Service Plan Scaler (lag autoscaler ${resourceToken})'
    description: 'Read an App Service Plan and change its instance count. Assigned by the Event Hubs lag autoscaler on each target plan only.'
    type: 'CustomRole'
    permissions: [
      {
        actions: [
          'Microsoft.Web/serverfarms/read'
          'Microsoft.Web/serverfarms/write'
        ]
        notActions: []
        dataActions: []
        notDataActions: []
      }
    ]
    assignableScopes: union(planResourceGroupScopes, [])
  }
}

// Custom role: list Azure Monitor autoscale settings, nothing else: the scale service refuses to
// fight another controller on a plan (an enabled setting targeting it). Monitoring Reader would
// do too, but reads every metric and log of its scope.
resource autoscaleReaderRole 'Microsoft.Authorization/roleDefinitions@2022-04-01' = {
  name: guid(subscription().id, 'eventhubs-lag-autoscaler-autoscale-reader', resourceToken)
  properties: {
    roleName: 'Autoscale Settings Reader (lag autoscaler ${resourceToken})'
    description: 'List the Azure Monitor autoscale settings of a resource group. Assigned by the Event Hubs lag autoscaler on the resource groups of its target plans only.'
    type: 'CustomRole'
    permissions: [
      {
        actions: [
          'Microsoft.Insights/autoscalesettings/read'
        ]
        notActions: []
        dataActions: []
        notDataActions: []
      }
    ]
    assignableScopes: union(planResourceGroupScopes, [])
  }
}

// Custom role: read Service Bus queues and topic subscriptions (their message counts), nothing
// else. Azure Service Bus Data Owner (what the data plane's runtime properties need) could also
// send, receive and delete every message of the namespace; this role has no data action at all.
// Reader would do too, but reads every resource type in its scope.
resource serviceBusReaderRole 'Microsoft.Authorization/roleDefinitions@2022-04-01' = if (!empty(serviceBusNamespaceIds)) {
  name: serviceBusReaderRoleName
  properties: {
    roleName: 'Service Bus Entity Reader (lag autoscaler ${resourceToken})'
    description: 'Read Service Bus queues and topic subscriptions (message counts) on the management plane. No data actions. Assigned by the Event Hubs lag autoscaler on each watched namespace only.'
    type: 'CustomRole'
    permissions: [
      {
        actions: [
          'Microsoft.ServiceBus/namespaces/queues/read'
          'Microsoft.ServiceBus/namespaces/topics/subscriptions/read'
        ]
        notActions: []
        dataActions: []
        notDataActions: []
      }
    ]
    assignableScopes: union(serviceBusResourceGroupScopes, [])
  }
}

// Custom role: read an Event Hubs namespace and change its throughput units (sku.capacity).
// ARM has no action narrower than Microsoft.EventHub/namespaces/write for a SKU change (capacity
// is a property of the namespace resource, written by the same PUT/PATCH as its other
// properties), and RBAC conditions (ABAC) apply to data actions of a few services, not to
// Microsoft.EventHub control-plane writes. So the role alone could also change the namespace's
// other settings (TLS minimum, local auth, network access, auto-inflate, tags...). What narrows it
// to sku.capacity is a deny Azure Policy assigned on each namespace (app/eventhubs-tu-pin.bicep,
// pinEventHubsNamespaceSettings): every other writable setting Azure Policy can read is pinned to
// its value at deployment time (docs/deploy.md lists the few it cannot: no alias, or changed
// through another API), and the capacity to the target's min_tus..max_tus. The pin binds every caller,
// owners included; Azure Policy can tell callers apart (requestContext().identity), but it sees
// the namespace as it would be after the write, not the change, so a pin on the autoscaler alone
// would go stale at the owner's first change and then refuse the autoscaler's own writes.
// What the role cannot do at all: delete the namespace (no /delete), read or rotate keys (no
// listKeys/action, no authorizationRules), touch event hubs, consumer groups or network rule sets
// (each child has its own write action, not included: namespaces/write does not imply them), or
// read or send any event (no data actions). It is assignable in the namespaces' resource groups
// only and assigned on each namespace resource alone (app/eventhubs-tu-scaler.bicep).
resource tuScalerRole 'Microsoft.Authorization/roleDefinitions@2022-04-01' = if (!empty(eventHubsTuNamespaceIds)) {
  name: tuScalerRoleName
  properties: {
    roleName: 'Event Hubs Throughput Unit Scaler (lag autoscaler ${resourceToken})'
    description: 'Read an Event Hubs namespace and change its throughput units (sku.capacity). No delete, no keys, no child resources, no data actions. Assigned by the Event Hubs lag autoscaler on each sized namespace only.'
    type: 'CustomRole'
    permissions: [
      {
        actions: [
          'Microsoft.EventHub/namespaces/read'
          'Microsoft.EventHub/namespaces/write'
        ]
        notActions: []
        dataActions: []
        notDataActions: []
      }
    ]
    assignableScopes: union(tuNamespaceResourceGroupScopes, [])
  }
}

module identity 'app/identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: 'id-${resourceToken}'
    location: location
    tags: tags
  }
}

module monitoring 'app/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: 'log-${resourceToken}'
    applicationInsightsName: 'appi-${resourceToken}'
    location: location
    tags: tags
    publisherPrincipalId: identity.outputs.principalId
  }
}

// The operator's views on that telemetry: a workbook per target and the alert rules.
module operations 'app/operations.bicep' = {
  name: 'operations'
  scope: rg
  params: {
    location: location
    tags: tags
    applicationInsightsId: monitoring.outputs.applicationInsightsId
    resourceToken: resourceToken
    alertEmailAddresses: alertEmailAddresses
  }
}

module storage 'app/storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    name: 'st${resourceToken}'
    location: location
    tags: tags
    deploymentContainerName: deploymentContainerName
    principalId: identity.outputs.principalId
  }
}

module functionApp 'app/function.bicep' = {
  name: 'function'
  scope: rg
  params: {
    name: 'func-${resourceToken}'
    planName: 'plan-${resourceToken}'
    location: location
    tags: tags
    serviceName: serviceName
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    storageAccountName: storage.outputs.name
    blobEndpoint: storage.outputs.blobEndpoint
    queueEndpoint: storage.outputs.queueEndpoint
    tableEndpoint: storage.outputs.tableEndpoint
    deploymentContainerName: storage.outputs.deploymentContainerName
    applicationInsightsConnectionString: monitoring.outputs.applicationInsightsConnectionString
    autoscalerPolicy: string(autoscalerPolicy)
    collectSchedule: collectSchedule
    scalerDryRun: scalerDryRun
    historyRetentionDays: historyRetentionDays
    ownershipExpirySeconds: ownershipExpirySeconds
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
  }
}

// Role assignments on the watched and resized resources, each module deployed into the resource
// group (and subscription) of its target, as parsed from the resource id.

module eventHubsAccess 'app/eventhubs-receiver.bicep' = [for (ns, i) in eventHubNamespaces: {
  name: take('${environmentName}-eventhubs-receiver-${i}', 64)
  scope: resourceGroup(split(ns.resourceId, '/')[2], split(ns.resourceId, '/')[4])
  params: {
    namespaceName: last(split(ns.resourceId, '/'))
    eventHubNames: contains(ns, 'eventHubs') ? ns.eventHubs : []
    principalId: identity.outputs.principalId
  }
}]

module checkpointAccess 'app/checkpoint-reader.bicep' = [for (cp, i) in checkpointContainers: {
  name: take('${environmentName}-checkpoint-reader-${i}', 64)
  scope: resourceGroup(split(cp.storageAccountId, '/')[2], split(cp.storageAccountId, '/')[4])
  params: {
    storageAccountName: last(split(cp.storageAccountId, '/'))
    containerName: cp.containerName
    principalId: identity.outputs.principalId
  }
}]

module serviceBusAccess 'app/servicebus-reader.bicep' = [for (sbId, i) in serviceBusNamespaceIds: {
  name: take('${environmentName}-servicebus-reader-${i}', 64)
  scope: resourceGroup(split(sbId, '/')[2], split(sbId, '/')[4])
  dependsOn: [
    serviceBusReaderRole
  ]
  params: {
    namespaceName: last(split(sbId, '/'))
    roleDefinitionName: serviceBusReaderRoleName
    principalId: identity.outputs.principalId
  }
}]

module serviceBusQueuePeek 'app/servicebus-queue-receiver.bicep' = [for (queueId, i) in serviceBusSloQueueIds: {
  name: take('${environmentName}-servicebus-peek-${i}', 64)
  scope: resourceGroup(split(queueId, '/')[2], split(queueId, '/')[4])
  params: {
    namespaceName: split(queueId, '/')[8]
    queueName: last(split(queueId, '/'))
    principalId: identity.outputs.principalId
  }
}]

module serviceBusMetrics 'app/servicebus-metrics-reader.bicep' = [for (sbId, i) in serviceBusSloNamespaceIds: {
  name: take('${environmentName}-servicebus-metrics-${i}', 64)
  scope: resourceGroup(split(sbId, '/')[2], split(sbId, '/')[4])
  params: {
    namespaceName: last(split(sbId, '/'))
    principalId: identity.outputs.principalId
  }
}]

module tuAccess 'app/eventhubs-tu-scaler.bicep' = [for (nsId, i) in eventHubsTuNamespaceIds: {
  name: take('${environmentName}-eventhubs-tu-scaler-${i}', 64)
  scope: resourceGroup(split(nsId, '/')[2], split(nsId, '/')[4])
  dependsOn: [
    tuScalerRole
  ]
  params: {
    namespaceName: last(split(nsId, '/'))
    roleDefinitionName: tuScalerRoleName
    principalId: identity.outputs.principalId
  }
}]

// The pin that narrows the TU scaler role to sku.capacity (see the role above), one per namespace,
// deployed at the namespace's subscription (a policy definition lives at a subscription).
module tuPin 'app/eventhubs-tu-pin.bicep' = [for (nsId, i) in eventHubsTuNamespaceIds: {
  name: take('${environmentName}-eventhubs-tu-pin-${i}', 64)
  scope: subscription(split(nsId, '/')[2])
  params: {
    namespaceId: nsId
    namespacePolicies: autoscalerPolicy.?namespaces ?? []
    resourceToken: resourceToken
    enforce: pinEventHubsNamespaceSettings
  }
}]

module planAccess 'app/plan-scaler.bicep' = [for (planId, i) in targetPlanIds: {
  name: take('${environmentName}-plan-scaler-${i}', 64)
  scope: resourceGroup(split(planId, '/')[2], split(planId, '/')[4])
  params: {
    planName: last(split(planId, '/'))
    roleDefinitionName: planScalerRole.name
    autoscaleReaderRoleDefinitionName: autoscaleReaderRole.name
    principalId: identity.outputs.principalId
  }
}]

// azd stores these outputs as environment values (.azure/<env>/.env); the post-provision hook
// turns them into local.settings.json.
output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_SUBSCRIPTION_ID string = subscription().subscriptionId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = functionApp.outputs.name
output AZURE_FUNCTION_PLAN_NAME string = functionApp.outputs.planName
output AZURE_STORAGE_ACCOUNT_NAME string = storage.outputs.name
output AZURE_STORAGE_BLOB_ENDPOINT string = storage.outputs.blobEndpoint
output AZURE_STORAGE_QUEUE_ENDPOINT string = storage.outputs.queueEndpoint
output AZURE_STORAGE_TABLE_ENDPOINT string = storage.outputs.tableEndpoint
output AZURE_CLIENT_ID string = identity.outputs.clientId
output AZURE_MANAGED_IDENTITY_NAME string = identity.outputs.name
output AZURE_MANAGED_IDENTITY_PRINCIPAL_ID string = identity.outputs.principalId
output AZURE_PLAN_SCALER_ROLE_ID string = planScalerRole.id
output APPLICATIONINSIGHTS_CONNECTION_STRING string = monitoring.outputs.applicationInsightsConnectionString
output AZURE_MONITOR_WORKBOOK_ID string = operations.outputs.workbookId
output AUTOSCALER_POLICY string = string(autoscalerPolicy)
output COLLECT_SCHEDULE string = collectSchedule
output SCALER_DRY_RUN string = scalerDryRun ? 'true' : 'false'
output HISTORY_RETENTION_DAYS string = string(historyRetentionDays)
output OWNERSHIP_EXPIRY_SECONDS string = string(ownershipExpirySeconds)
