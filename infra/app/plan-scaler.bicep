// Lets the autoscaler read and resize one target App Service Plan. Deployed into the plan's
// resource group; the custom role (serverfarms read + write only, defined in main.bicep) is
// assigned on the plan resource itself, never on a resource group or subscription.
// And lets it see another controller on the plan: the custom autoscale-settings reader role
// (Microsoft.Insights/autoscalesettings/read only) on the plan's resource group, the narrowest
// scope at which ARM lists autoscale settings (they name their target plan, not the other way).

@description('Name of the existing App Service Plan (in the resource group this module is deployed to).')
param planName string

@description('Name (GUID) of the custom plan-scaler role definition.')
param roleDefinitionName string

@description('Name (GUID) of the custom autoscale-settings reader role definition.')
param autoscaleReaderRoleDefinitionName string

@description('Principal id of the autoscaler managed identity.')
param principalId string

// Resolved in this module's subscription, so plans in another subscription of the tenant work
// as long as their resource group is one of the role's assignable scopes.
var planScalerRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleDefinitionName)
var autoscaleReaderRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', autoscaleReaderRoleDefinitionName)

resource plan 'Microsoft.Web/serverfarms@2024-04-01' existing = {
  name: planName
}

resource planScaler 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(plan.id, principalId, planScalerRoleId)
  scope: plan
  properties: {
    description: 'App Service Plan Scaler (custom): read and resize this plan only'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: planScalerRoleId
  }
}

// No scope: this module's resource group, the plan's. Several plans in one group assign it once
// (same guid).
resource autoscaleReader 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(resourceGroup().id, principalId, autoscaleReaderRoleId)
  properties: {
    description: 'Autoscale Settings Reader (custom): list the autoscale settings of the plan\'s resource group only'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: autoscaleReaderRoleId
  }
}
