{{ config(materialized='table') }}
select team, count(*) as members, sum(salary) as payroll
from {{ ref('people') }}
group by team
