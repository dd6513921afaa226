// placeholder until implemented
#pragma once
