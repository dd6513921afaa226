#include "nn/sequential.h"

namespace brigade::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(layers_.size()), module);
  layers_.push_back(std::move(module));
}

void Sequential::push_back(const std::string& name, std::shared_ptr<Module> module) {
  register_module(name, module);
  layers_.push_back(std::move(module));
}

const std::shared_ptr<Module>& Sequential::operator[](size_t i) const {
  BRIGADE_CHECK(i < layers_.size(), "Sequential: index ", i, " is out of range for ", layers_.size(), " modules");
  return layers_[i];
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& layer : layers_) h = (*layer)(h);
  return h;
}

}  // namespace brigade::nn
